"""Subprocess side of the offline compile: build the launcher and compile it on CPU tensors."""

import importlib
import json
import sys


def main() -> None:
    import flydsl.compiler as flyc
    import torch

    spec = json.loads(sys.stdin.read())
    module, func = spec["builder"].split(":")
    launch = getattr(importlib.import_module(module), func)(**spec["kwargs"])
    dtypes = {"bf16": torch.bfloat16, "f32": torch.float32, "i8": torch.int8, "u8": torch.uint8, "i32": torch.int32}
    # A shape of None is a scalar parameter (an address or a count): compiled on the value 0.
    args = [0 if shape is None else torch.zeros(shape, dtype=dtypes[dtype]) for dtype, shape in spec["args"]]
    flyc.compile(launch, *args)


if __name__ == "__main__":
    main()
