"""Writes the oracle goldens: python3 tests/goldens/make/make_goldens.py DEFINITIONS_DIR OUT_DIR

DEFINITIONS_DIR is a FlashInfer Trace definitions/ folder (shared/flashinfer-trace/definitions);
OUT_DIR is usually tests/goldens. Runs basic.make (gemm, rmsnorm, rope, sampling) and, when
tests/goldens/make/attention.py exists, attention.make; then prints every golden in OUT_DIR with
its size and the total. Needs PyTorch (and a GPU for realistic references), numpy, safetensors.
"""
import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import basic  # noqa: E402


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    definitions_dir, out_dir = argv[1], argv[2]
    if not os.path.isdir(definitions_dir):
        print(f"no such definitions folder: {definitions_dir}", file=sys.stderr)
        return 2
    os.makedirs(out_dir, exist_ok=True)
    makers = [basic]
    if importlib.util.find_spec("attention") is not None:
        import attention
        makers.append(attention)
    for m in makers:
        m.make(definitions_dir, out_dir)
    total = 0
    names = sorted(n for n in os.listdir(out_dir) if n.endswith(".safetensors"))
    for n in names:
        size = os.path.getsize(os.path.join(out_dir, n))
        total += size
        print(f"{n} {size}")
    print(f"total {total} bytes in {len(names)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
