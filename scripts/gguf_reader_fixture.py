#!/usr/bin/env python3
"""What gguf-py's own reader (`gguf.GGUFReader`, gguf 0.19.0, numpy 2.4.6) finds in each GGUF
file of a folder: version, alignment, where the data starts, every metadata key with its value
type(s) and value, and every tensor's name, ggml type, shape (GGUF's order: innermost first),
element and byte counts and absolute data offset. dtcast's GGUF reader is tested against it
(`tests/tests/gguf_reader.rs`).

    python3 scripts/gguf_reader_fixture.py tests/fixtures/gguf > tests/fixtures/gguf/reader.json

Values: strings as their bytes in hex (GGUF strings need not be UTF-8), floats as the hex of
their IEEE bits at the stored width, integers and booleans as numbers; arrays as lists.
"""
import json
import os
import struct
import sys

import gguf
from gguf import GGUFValueType as V


def encode(kind, value):
    if kind == V.STRING:
        return (value if isinstance(value, bytes) else value.encode("utf-8")).hex()
    if kind == V.FLOAT32:
        return struct.pack("<f", value).hex()
    if kind == V.FLOAT64:
        return struct.pack("<d", value).hex()
    if kind == V.BOOL:
        return bool(value)
    return int(value)


def field(f):
    types = [V(t) for t in f.types]
    if types[0] != V.ARRAY:
        if types[0] == V.STRING:
            return [t.name for t in types], encode(V.STRING, bytes(f.parts[-1]))
        return [t.name for t in types], encode(types[0], f.parts[-1][0])
    # Arrays (of one level, which is all the fixtures hold): each element's part by `data`.
    kind = types[1]
    items = []
    for i in f.data:
        part = f.parts[i]
        items.append(encode(kind, bytes(part) if kind == V.STRING else part[0]))
    return [t.name for t in types], items


def describe(path):
    r = gguf.GGUFReader(path)
    meta = []
    for key, f in r.fields.items():
        if key.startswith("GGUF."):
            continue
        types, value = field(f)
        meta.append({"key": key, "types": types, "value": value})
    tensors = [
        {
            "name": t.name,
            "type": t.tensor_type.name,
            "shape": [int(d) for d in t.shape],
            "elements": int(t.n_elements),
            "bytes": int(t.n_bytes),
            "offset": int(t.data_offset),
        }
        for t in r.tensors
    ]
    version = int(r.fields["GGUF.version"].parts[-1][0])
    return {"version": version, "alignment": int(r.alignment), "data_offset": int(r.data_offset),
            "metadata": meta, "tensors": tensors}


folder = sys.argv[1]
out = {"gguf": gguf.__version__ if hasattr(gguf, "__version__") else "0.19.0", "files": {}}
for name in sorted(os.listdir(folder)):
    if name.endswith(".gguf"):
        out["files"][name] = describe(os.path.join(folder, name))
json.dump(out, sys.stdout, indent=1)
print()
