"""Writes token files from the GPL-3 text (each byte a uint16 id) into DIR:
train.bin and val.bin (flat, nanoGPT's; the text's 90/10 split), llmc.bin
(train.bin with llm.c's header), mod64.bin (ids mod 64, for a 64-token
vocabulary) and broken ones: an id of 300 at position 1234, an odd size,
a header whose count is wrong, llm.c's version 2, an empty file, and one
too short for a sequence."""
import array
import os
import sys

out = sys.argv[1]
text = open("/usr/share/common-licenses/GPL-3", "rb").read()
ids = array.array("H", list(text))
n = len(ids) * 9 // 10


def write(name, data):
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)


def llmc(tokens, count=None, version=1):
    header = array.array("i", [20240520, version,
                               len(tokens) if count is None else count])
    header.extend([0] * 253)
    return header.tobytes() + tokens.tobytes()


write("train.bin", ids[:n].tobytes())
write("val.bin", ids[n:].tobytes())
write("llmc.bin", llmc(ids[:n]))
write("mod64.bin", array.array("H", [i % 64 for i in ids]).tobytes())
bad = array.array("H", ids[:5000])
bad[1234] = 300
write("bad-id.bin", bad.tobytes())
write("odd.bin", ids[:5000].tobytes() + b"\0")
write("bad-count.bin", llmc(ids[:5000], count=6000))
write("version2.bin", llmc(ids[:5000], version=2))
write("empty.bin", b"")
write("short.bin", ids[:100].tobytes())
