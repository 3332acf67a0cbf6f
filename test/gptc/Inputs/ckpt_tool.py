"""Reads and damages gptc checkpoints for the tests, without protobuf's
Python package: a small decoder of the wire format for checkpoint.proto.

  ckpt_tool.py flip STEPDIR NAME N     flip N bytes in the middle of NAME's data
  ckpt_tool.py to-format2 STEPDIR OUT  write the checkpoint as one format 2 file
  ckpt_tool.py list STEPDIR            name, shape and shards of each tensor
  ckpt_tool.py crcs STEPDIR            name and CRC-32C of each shard
"""
import os
import struct
import sys


def varint(b, i):
    v = s = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return v, i


def fields(b):
    """(field number, wire type, value) of a message's bytes."""
    i = 0
    while i < len(b):
        key, i = varint(b, i)
        f, w = key >> 3, key & 7
        if w == 0:
            v, i = varint(b, i)
        elif w == 1:
            v, i = b[i:i + 8], i + 8
        elif w == 5:
            v, i = b[i:i + 4], i + 4
        elif w == 2:
            n, i = varint(b, i)
            v, i = b[i:i + n], i + n
        else:
            raise ValueError("wire type %d" % w)
        yield f, w, v


def packed(v):
    out, i = [], 0
    while i < len(v):
        x, i = varint(v, i)
        out.append(x)
    return out


def manifest(stepdir):
    raw = open(os.path.join(stepdir, "manifest.pb"), "rb").read()
    top, tensors = {}, []
    for f, w, v in fields(raw):
        if f == 12:
            t = {"shape": [], "shards": []}
            for tf, tw, tv in fields(v):
                if tf == 1:
                    t["name"] = tv.decode()
                elif tf == 2:
                    t["dtype"] = tv
                elif tf == 3:
                    t["shape"] += packed(tv) if tw == 2 else [tv]
                elif tf == 4:
                    s = {"start": [], "extent": [], "offset": 0}
                    for sf, sw, sv in fields(tv):
                        if sf in (1, 2):
                            key = "start" if sf == 1 else "extent"
                            s[key] += packed(sv) if sw == 2 else [sv]
                        elif sf == 3:
                            s["file"] = sv.decode()
                        elif sf == 4:
                            s["offset"] = sv
                        elif sf == 5:
                            s["bytes"] = sv
                        elif sf == 6:
                            s["crc32c"] = struct.unpack("<I", sv)[0]
                    t["shards"].append(s)
            tensors.append(t)
        else:
            top[f] = v
    return top, tensors


def enc_varint(v):
    out = bytearray()
    while True:
        out.append((v & 0x7F) | (0x80 if v > 0x7F else 0))
        v >>= 7
        if not v:
            return bytes(out)


def field(f, w, payload):
    key = enc_varint((f << 3) | w)
    if w == 2:
        return key + enc_varint(len(payload)) + payload
    return key + payload


def main():
    cmd, stepdir = sys.argv[1], sys.argv[2]
    top, tensors = manifest(stepdir)
    if cmd == "list":
        for t in tensors:
            print(t["name"], t["shape"], [(s["file"], s["start"], s["extent"])
                                          for s in t["shards"]])
    elif cmd == "crcs":
        for t in tensors:
            print(t["name"], " ".join("%08x" % s["crc32c"] for s in t["shards"]))
    elif cmd == "flip":
        name, n = sys.argv[3], int(sys.argv[4])
        t = next(t for t in tensors if t["name"] == name)
        s = max(t["shards"], key=lambda s: s["bytes"])
        path = os.path.join(stepdir, s["file"])
        b = bytearray(open(path, "rb").read())
        at = s["offset"] + s["bytes"] // 2
        for k in range(n):
            b[at + k] ^= 0xFF
        open(path, "wb").write(b)
    elif cmd == "to-format2":
        # checkpoint.proto's Checkpoint: the tensors whole, each with its
        # CRC-32C (one shard each: a checkpoint of one process).
        out = field(1, 0, enc_varint(2))
        for f in (2, 3, 4):
            out += field(f, 2, top.get(f, b""))
        out += field(5, 0, enc_varint(top.get(5, 0)))
        out += field(6, 0, enc_varint(top.get(6, 0)))
        for f in (8, 9):
            if f in top:
                out += field(f, 1, top[f])
        for t in tensors:
            assert len(t["shards"]) == 1, "one process's checkpoint only"
            s = t["shards"][0]
            data = open(os.path.join(stepdir, s["file"]), "rb").read()
            data = data[s["offset"]:s["offset"] + s["bytes"]]
            shape = b"".join(enc_varint(d) for d in t["shape"])
            body = (field(1, 2, t["name"].encode()) +
                    field(2, 0, enc_varint(t["dtype"])) +
                    (field(3, 2, shape) if t["shape"] else b"") +
                    field(4, 2, data) +
                    field(5, 5, struct.pack("<I", s["crc32c"])))
            out += field(7, 2, body)
        open(sys.argv[3], "wb").write(out)
    else:
        sys.exit("unknown command " + cmd)


if __name__ == "__main__":
    main()
