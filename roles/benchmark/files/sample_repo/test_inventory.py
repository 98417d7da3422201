from inventory import Inventory


def test_add_and_total() -> None:
    stock = Inventory()
    stock.add("bolt", 3)
    stock.add("nut", 2)
    assert stock.total() == 5
