"""Writes the GPT configurations of Megatron-LM's scaling study
(Narayanan et al., 2021, "Efficient Large-Scale Language Model Training on
GPU Clusters Using Megatron-LM", table 1) as gptc descriptions, in fp16 as
trained there: vocabulary 51,200, sequence 2048.

    megatron_configs.py OUTDIR

writes OUTDIR/megatron-<size>.pbtxt for each row and prints one line per
row: its name, the GPUs it ran on, and the paper's tensor and pipeline
sizes.
"""
import os
import sys

# size, heads, width, layers, tensor, pipeline, GPUs, batch
ROWS = [
    ("1.7b", 24, 2304, 24, 1, 1, 32, 512),
    ("3.6b", 32, 3072, 30, 2, 1, 64, 512),
    ("7.5b", 32, 4096, 36, 4, 1, 128, 512),
    ("18.4b", 48, 6144, 40, 8, 1, 256, 1024),
    ("39.1b", 64, 8192, 48, 8, 2, 512, 1536),
    ("76.1b", 80, 10240, 60, 8, 4, 1024, 1792),
    ("145.6b", 96, 12288, 80, 8, 8, 1536, 2304),
    ("310.1b", 128, 16384, 96, 8, 16, 1920, 2160),
    ("529.6b", 128, 20480, 105, 8, 35, 2520, 2520),
    ("1008b", 160, 25600, 128, 8, 64, 3072, 3072),
]


def main():
    out = sys.argv[1]
    for size, heads, width, layers, tp, pp, gpus, batch in ROWS:
        with open(os.path.join(out, f"megatron-{size}.pbtxt"), "w") as f:
            f.write(f"""# Megatron-LM's {size} GPT (Narayanan et al., 2021, table 1):
# tp={tp}, pp={pp} on {gpus} A100 80GB, batch {batch}.
name: "megatron-{size}"
model {{
  vocab_size: 51200 context_length: 2048 num_layers: {layers}
  num_heads: {heads} model_dim: {width} tied_embeddings: true
}}
training {{
  batch_size: {batch} seq_len: 2048 steps: 1000 precision: FP16
  optimizer {{ lr: 1e-4 }}
}}
""")
        print(f"megatron-{size} {gpus} tp={tp} pp={pp}")


if __name__ == "__main__":
    main()
