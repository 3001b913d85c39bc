#!/usr/bin/env python3
"""make-target.py -- a higher-precision copy of a GGUF model, for
speculative decoding's draft/target pairs: every weight tensor of the input
is dequantized and written back as TYPE (f16 or q8_0); metadata, the
vocabulary and the norms are copied unchanged. The quantized input then
serves as the draft of the copy (same vocabulary, nearly the same weights).

    make-target.py IN.gguf OUT.gguf [f16|q8_0]

Needs the `gguf` and `numpy` packages (the tokenizer venv has both:
scripts/tok-venv.sh). The copy carries no more information than the input:
it is a target for measuring speed and acceptance, not a better model.
"""
import sys

import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf import GGUFReader, GGUFValueType, GGUFWriter
from gguf.quants import dequantize, quantize


def copy_field(w, field):
    """One key/value of the reader into the writer, with its own type."""
    name = field.name
    if name.startswith("GGUF.") or name == "general.architecture":
        return
    t = field.types[0]
    if t == GGUFValueType.ARRAY:
        sub = field.types[1]
        if sub == GGUFValueType.STRING:
            vals = [bytes(field.parts[i]).decode("utf-8", "surrogateescape") for i in field.data]
        else:
            vals = [field.parts[i][0].item() for i in field.data]
        w.add_array(name, vals)
    elif t == GGUFValueType.STRING:
        w.add_string(name, bytes(field.parts[field.data[0]]).decode("utf-8", "surrogateescape"))
    else:
        w.add_key_value(name, field.parts[field.data[0]][0].item(), t)


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit("usage: make-target.py IN.gguf OUT.gguf [f16|q8_0]")
    src, dst = sys.argv[1], sys.argv[2]
    kind = sys.argv[3] if len(sys.argv) == 4 else "f16"
    if kind not in ("f16", "q8_0"):
        sys.exit("make-target.py: TYPE must be f16 or q8_0")
    r = GGUFReader(src)
    arch = bytes(r.fields["general.architecture"].parts[-1]).decode()
    w = GGUFWriter(dst, arch)
    for field in r.fields.values():
        if field.name == "general.file_type":
            w.add_file_type(1 if kind == "f16" else 7)
        else:
            copy_field(w, field)
    for t in r.tensors:
        if t.tensor_type in (Q.F32,) or len(t.shape) < 2:
            w.add_tensor(t.name, np.array(t.data), raw_dtype=t.tensor_type)
            continue
        x = dequantize(t.data, t.tensor_type).astype(np.float32)
        if kind == "f16":
            w.add_tensor(t.name, x.astype(np.float16), raw_dtype=Q.F16)
        else:
            w.add_tensor(t.name, quantize(x, Q.Q8_0), raw_shape=quantize(x, Q.Q8_0).shape, raw_dtype=Q.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
