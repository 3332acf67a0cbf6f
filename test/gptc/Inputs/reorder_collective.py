"""Mutates a pipeline's compiled module (gptc --emit=train) as a bug in a
schedule would: in @stage<S> (default 1) the last shard.send moves after
the stage's first collective over the pipeline axis (the tied embedding's
all_reduce), reordering that rank's collective against its messages.

    reorder_collective.py MODULE.mlir [STAGE] > MUTATED.mlir
"""
import sys


def main():
    text = open(sys.argv[1]).read()
    stage = sys.argv[2] if len(sys.argv) > 2 else "1"
    start = text.index(f"func.func private @stage{stage}(")
    end = text.find("\n  func.func", start + 1)
    end = len(text) if end < 0 else end
    lines = text[start:end].split("\n")
    sends = [i for i, l in enumerate(lines) if "shard.send" in l]
    if not sends:
        sys.exit(f"@stage{stage} has no shard.send")
    moved = lines.pop(sends[-1])
    collective = next((i for i, l in enumerate(lines)
                       if "shard.all_reduce" in l and "grid_axes = [0]" in l), None)
    if collective is None:
        sys.exit(f"@stage{stage} has no all_reduce over the pipeline axis")
    lines.insert(collective + 1, moved)
    sys.stdout.write(text[:start] + "\n".join(lines) + text[end:])


if __name__ == "__main__":
    main()
