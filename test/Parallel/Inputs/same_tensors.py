"""Checks that two sets of dumped tensors are bit-identical.

    same_tensors.py DIR_A PREFIX_A DIR_B PREFIX_B

compares every DIR_A/PREFIX_A<name>.npy with DIR_B/PREFIX_B<name>.npy byte
for byte (a skipped step must leave the state exactly as it was) and prints
"same: N tensors" or the names that differ (exit status 1).
"""

import glob
import os
import sys


def main():
    dir_a, prefix_a, dir_b, prefix_b = sys.argv[1:5]
    files = sorted(glob.glob(os.path.join(dir_a, prefix_a + "*.npy")))
    if not files:
        print(f"same: no tensors match {prefix_a}* in {dir_a}")
        return 1
    differ = []
    for a in files:
        name = os.path.basename(a)[len(prefix_a):]
        b = os.path.join(dir_b, prefix_b + name)
        if not os.path.exists(b):
            differ.append(name + " (missing)")
        elif open(a, "rb").read() != open(b, "rb").read():
            differ.append(name)
    if differ:
        print("differ: " + ", ".join(differ))
        return 1
    print(f"same: {len(files)} tensors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
