#!/usr/bin/env bash
# Proof run of llmfleet.cluster.cuda_free_memory on a machine with a real NVIDIA GPU.
#
# Run from anywhere on the device machine, with OUT naming the folder that comes back:
#     OUT=/some/dir tests/device/prove_cuda_free_memory.sh
#
# 1. Builds a venv with nvidia-ml-py (pynvml) and ansible-core. When pip cannot reach
#    PyPI, the venv still sees the system's packages (--system-site-packages): a system
#    pynvml and/or ansible are used if present; without ansible the module's logic
#    (plugins/module_utils/_memory/gpu_memory.py and its pieces, plain Python) runs directly.
# 2. Runs the module ad hoc against localhost three times:
#       method=nvml, method=nvidia_smi, gpu_memory_utilization=0.9
#    and writes each result to $OUT/<case>.json (the module's JSON result) with the
#    command, its status and its output next to it in $OUT/<case>.log.
# 3. Saves what to compare the numbers with: nvidia-smi's own answer to the same query
#    ($OUT/nvidia-smi-query.csv), nvidia-smi -L, /proc/meminfo and the versions used.
#
# Exit status: 0 when every case produced a parseable module result (a FAILED fit check
# is a result: a busy GPU legitimately fails gpu_memory_utilization=0.9); 1 otherwise.
set -euo pipefail

log() { printf '[prove_cuda_free_memory] %s\n' "$*" >&2; }

: "${OUT:?set OUT to the folder the results go to}"
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
WORK=${WORK:-$(mktemp -d "${TMPDIR:-/tmp}/prove-cuda-free-memory.XXXXXX")}
VENV=$WORK/venv
SYSTEM_PYTHON=${PYTHON:-python3}
mkdir -p "$OUT"
log "repository: $REPO"
log "results to: $OUT; scratch: $WORK"

# --- what the machine says by itself ------------------------------------------------
log "recording nvidia-smi's own view and /proc/meminfo"
if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi -L >"$OUT/nvidia-smi-L.txt" 2>&1 || log "nvidia-smi -L failed (see nvidia-smi-L.txt)"
    nvidia-smi \
        --query-gpu=index,name,uuid,memory.total,memory.free,memory.used \
        --format=csv,noheader,nounits >"$OUT/nvidia-smi-query.csv" 2>&1 ||
        log "nvidia-smi --query-gpu failed (see nvidia-smi-query.csv)"
    nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1 || true
else
    log "nvidia-smi is not on PATH"
    echo "nvidia-smi not on PATH" >"$OUT/nvidia-smi-L.txt"
fi
cp /proc/meminfo "$OUT/meminfo.txt" 2>/dev/null || log "cannot copy /proc/meminfo"

# --- Python environment ------------------------------------------------------------------
PY=$SYSTEM_PYTHON
log "creating a venv at $VENV (with the system's site-packages visible)"
if "$SYSTEM_PYTHON" -m venv --system-site-packages "$VENV" >"$OUT/venv.log" 2>&1; then
    PY=$VENV/bin/python
    log "installing nvidia-ml-py and ansible-core with pip (log: $OUT/pip.log)"
    if PIP_DEFAULT_TIMEOUT=20 timeout 420 "$PY" -m pip install --disable-pip-version-check \
        --retries 1 nvidia-ml-py ansible-core >"$OUT/pip.log" 2>&1; then
        log "pip install succeeded"
    else
        log "pip install failed (PyPI unreachable?); using what the system has"
        # One of the two may still be installable (for example from a local mirror).
        PIP_DEFAULT_TIMEOUT=20 timeout 120 "$PY" -m pip install --disable-pip-version-check \
            --retries 0 nvidia-ml-py >>"$OUT/pip.log" 2>&1 || true
    fi
else
    log "python3 -m venv failed (see venv.log); using $SYSTEM_PYTHON as it is"
fi

HAVE_PYNVML=no
if "$PY" -c 'import pynvml' >/dev/null 2>&1; then HAVE_PYNVML=yes; fi
# The controller needs ansible; the target Python ($PY) only runs the module's payload.
ANSIBLE=""
if [ -x "$VENV/bin/ansible" ]; then
    ANSIBLE=$VENV/bin/ansible
elif command -v ansible >/dev/null 2>&1; then
    ANSIBLE=$(command -v ansible)
fi
log "python: $PY; pynvml importable: $HAVE_PYNVML; ansible: ${ANSIBLE:-none (module_utils run directly)}"

"$PY" - "$OUT/versions.json" "$ANSIBLE" <<'EOF'
import json, platform, sys
from importlib import metadata

def version(dist):
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None

info = {
    "python": sys.version,
    "platform": platform.platform(),
    "machine": platform.machine(),
    "nvidia-ml-py": version("nvidia-ml-py"),
    "pynvml": version("pynvml"),
    "ansible-core": version("ansible-core"),
    "ansible_cli": sys.argv[2] or None,
}
try:
    import pynvml

    pynvml.nvmlInit()
    info["nvml_driver_version"] = str(pynvml.nvmlSystemGetDriverVersion())
    pynvml.nvmlShutdown()
except Exception as error:  # recorded, not fatal
    info["nvml_error"] = repr(error)
with open(sys.argv[1], "w", encoding="utf-8") as handle:
    json.dump(info, handle, indent=2)
EOF

# --- the three runs ------------------------------------------------------------------------
# Parses `ansible -o` output ("localhost | STATUS => {json}") into $OUT/<case>.json.
extract_result() {
    "$PY" - "$1" "$2" <<'EOF'
import json, sys

log_path, json_path = sys.argv[1], sys.argv[2]
for line in open(log_path, encoding="utf-8", errors="replace"):
    if line.startswith("localhost | ") and " => " in line:
        status, _, payload = line[len("localhost | "):].partition(" => ")
        result = json.loads(payload)
        result["_status"] = status.strip()
        with open(json_path, "w", encoding="utf-8") as handle:
            json.dump(result, handle, indent=2, sort_keys=True)
        print(status.strip())
        sys.exit(0)
print("no result line in " + log_path, file=sys.stderr)
sys.exit(1)
EOF
}

# Without ansible: the same logic the module runs, called directly.
run_direct() {
    local args=$1 json=$2
    "$PY" - "$REPO/collections" "$args" "$json" <<'EOF'
import importlib, json, shutil, subprocess, sys

collections, args, json_path = sys.argv[1], sys.argv[2], sys.argv[3]
# The checkout's collection, imported as ansible imports it (the pieces import each other so)
sys.path.insert(0, collections)
gm = importlib.import_module("ansible_collections.llmfleet.cluster.plugins.module_utils._memory.gpu_memory")
params = dict(item.split("=", 1) for item in args.split())

def run(argv):
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    return proc.returncode, proc.stdout, proc.stderr

util = params.get("gpu_memory_utilization")
try:
    result = gm.gather(
        method=params.get("method", "auto"),
        nvidia_smi_path=shutil.which("nvidia-smi"),
        run=run,
        gpu_memory_utilization=float(util) if util else None,
    )
    result["_status"] = "FAILED!" if result.pop("failed", False) else "SUCCESS"
except gm.GpuMemoryError as error:
    result = {"_status": "FAILED!", "msg": str(error)}
result["_runner"] = "module_utils direct (no ansible)"
with open(json_path, "w", encoding="utf-8") as handle:
    json.dump(result, handle, indent=2, sort_keys=True)
print(result["_status"])
EOF
}

FAILURES=0
run_case() {
    local case=$1 args=$2 status
    local log_file=$OUT/$case.log json_file=$OUT/$case.json
    if [ -n "$ANSIBLE" ]; then
        log "case $case: ansible localhost -m llmfleet.cluster.cuda_free_memory -a '$args'"
        {
            echo "+ ansible localhost -i localhost, -c local -m llmfleet.cluster.cuda_free_memory -a '$args' -o"
            (cd "$REPO" && ANSIBLE_CONFIG="$REPO/ansible.cfg" ANSIBLE_NOCOLOR=1 \
                ANSIBLE_DEPRECATION_WARNINGS=0 "$ANSIBLE" localhost -i localhost, -c local \
                -e "ansible_python_interpreter=$PY" \
                -m llmfleet.cluster.cuda_free_memory -a "$args" -o) 2>&1
        } >"$log_file" || true
        if status=$(extract_result "$log_file" "$json_file"); then
            log "case $case: $status -> $json_file"
        else
            log "case $case: NO RESULT (see $log_file)"
            FAILURES=$((FAILURES + 1))
        fi
    else
        log "case $case: module_utils directly with '$args'"
        if status=$(run_direct "$args" "$json_file" 2>"$log_file"); then
            log "case $case: $status -> $json_file"
        else
            log "case $case: NO RESULT (see $log_file)"
            FAILURES=$((FAILURES + 1))
        fi
    fi
    if [ -f "$json_file" ]; then
        "$PY" -c 'import json,sys; r=json.load(open(sys.argv[1])); print("   msg:", r.get("msg")); print("   source:", r.get("source"), "fallback_reason:", r.get("fallback_reason"))' "$json_file" >&2 || true
    fi
}

if [ "$HAVE_PYNVML" = no ]; then
    log "pynvml is not importable: the nvml case is expected to fail with a clear message"
fi
run_case nvml "method=nvml"
run_case nvidia_smi "method=nvidia_smi"
run_case utilization_0.9 "gpu_memory_utilization=0.9"

log "files in $OUT:"
ls -l "$OUT" >&2
if [ "$FAILURES" -ne 0 ]; then
    log "$FAILURES case(s) produced no module result"
    exit 1
fi
log "every case produced a module result"
