"""Writes the GPL-3 text (each byte a uint16 id) as one token file and as
three shards of uneven sizes into DIR: whole.bin; shards/train_000001.bin
(flat, nanoGPT's), train_000002.bin (llm.c's header) and train_000003.bin
(flat); bad/train_00000{1,2}.bin, the second with an id of 300 at its
position 77."""
import array
import os
import sys

out = sys.argv[1]
text = open("/usr/share/common-licenses/GPL-3", "rb").read()
ids = array.array("H", list(text))


def write(name, data):
    path = os.path.join(out, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def llmc(tokens):
    header = array.array("i", [20240520, 1, len(tokens)])
    header.extend([0] * 253)
    return header.tobytes() + tokens.tobytes()


write("whole.bin", ids.tobytes())
# Cuts that training windows (65 tokens) and the 90/10 split cross.
a, b = 10007, 30011
write("shards/train_000001.bin", ids[:a].tobytes())
write("shards/train_000002.bin", llmc(ids[a:b]))
write("shards/train_000003.bin", ids[b:].tobytes())
write("bad/train_000001.bin", ids[:a].tobytes())
bad = ids[a:b]
bad[77] = 300
write("bad/train_000002.bin", bad.tobytes())
