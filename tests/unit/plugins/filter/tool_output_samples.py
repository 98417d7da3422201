"""What ibdev2netdev, ethtool and perftest print on a DGX Spark: shared by the tests of
the parsers, of the fabric checks and of the RDMA verdict."""

IBDEV2NETDEV = """\
roceP2p1s0f0 port 1 ==> enP2p1s0f0np0 (Down)
roceP2p1s0f1 port 1 ==> enP2p1s0f1np1 (Up)
rocep1s0f0 port 1 ==> enp1s0f0np0 (Down)
rocep1s0f1 port 1 ==> enp1s0f1np1 (Up)
"""
IBDEV2NETDEV_VERBOSE = (
    "0000:01:00.1 rocep1s0f1 (MT4129 - NVD0000000087) NVIDIA ConnectX-7 fw 28.45.4028 "
    "port 1 (ACTIVE) ==> enp1s0f1np1 (Up)\n"
)
ETHTOOL_UP = """\
Settings for enp1s0f1np1:
\tSupported ports: [ FIBRE ]
\tSpeed: 200000Mb/s
\tDuplex: Full
\tLink detected: yes
"""
ETHTOOL_DOWN = """\
Settings for enp1s0f1np1:
\tSpeed: Unknown!
\tDuplex: Unknown! (255)
\tLink detected: no
"""
PERFTEST_GBITS = """\
---------------------------------------------------------------------------------------
                    RDMA_Write BW Test
 Dual-port       : OFF\t\tDevice         : rocep1s0f1
 Number of qps   : 4\t\tTransport type : IB
---------------------------------------------------------------------------------------
 #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]
 8388608    15870            0.00               106.51             0.001587
---------------------------------------------------------------------------------------
"""
