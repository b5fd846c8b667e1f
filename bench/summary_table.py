"""The table the server benches end with: each measure for lock and the peer, their ratio, and the
floor (what the work cannot go below on this machine) with lock's multiple of it."""


def print_summary(title, rows):
    """rows: (measure, lock, peer, floor, digits[, note]); peer or floor None where there is none.
    Values are shown with `digits` decimals, the floor with two."""
    print(f"\n== Summary: {title}")
    print(f"   {'measure':<34}{'lock':>9}{'peer':>9}{'ratio':>8}{'floor':>9}{'x floor':>9}")
    for measure, lock, peer, floor, digits, *note in rows:
        line = f"   {measure:<34}{lock:>9.{digits}f}"
        line += f"{peer:>9.{digits}f}{lock / peer:>7.2f}x" if peer is not None else f"{'-':>9}{'-':>8}"
        line += f"{floor:>9.2f}{lock / floor:>8.2f}x" if floor is not None else f"{'-':>9}{'-':>9}"
        print(line + (f"   {note[0]}" if note else ""))
