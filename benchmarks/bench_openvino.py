"""Is OpenVINO a faster CPU path than llama.cpp for derivaudit's workload? (OpenVINO is not a
dependency of derivaudit: run this in a separate environment with `pip install openvino nncf` next
to derivaudit's own packages.)

Usage:
    python benchmarks/bench_openvino.py [--model qwen2.5-coder-1.5b] [--tokens 600] [--threads 2]

Scoring is prefill-bound: with prefix reuse both engines compute the same tokens per write, so the
engine's prefill rate on one long evidence prompt decides. In one process, on the same token ids:
transformers float32 (the baseline), llama.cpp (the GGUF as shipped), and the same float32 torch
weights converted to OpenVINO IR, as float32, with int8 weights and with int4 weights (NNCF weight
compression). Prints prefill tokens/s, the ratio to the baseline, and the last-token log-odds
difference of yes/no against the baseline (agreement check).
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

TEXT = ("Passages from a conversation, in time order:\n" + "\n".join(
    f"[{i}] {'Caroline' if i % 2 else 'Melanie'}: I went to the LGBTQ support group yesterday and it was so "
    f"powerful to hear the stories of people like me; session {i} was about finding courage and family."
    for i in range(1, 40)))


def timed(fn, repeat: int = 2) -> tuple[float, object]:
    out, best = None, float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--tokens", type=int, default=600)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--int4", action="store_true", help="also int4 weights (slow to compress)")
    args = ap.parse_args()
    import numpy as np
    import openvino as ov
    import torch

    from derivaudit.models import Prompt, load_backend

    torch.set_num_threads(args.threads)
    hf = load_backend("transformers", args.model, cache=False, dtype="float32")
    prompt = Prompt(TEXT, "\nStatement: Caroline went to a support group.\nDo the passages above show that the "
                          "statement is true? Answer with one word, yes or no.")
    ids = hf.encode(prompt)
    ids = ids[-args.tokens:] if len(ids) > args.tokens else ids
    n = len(ids)
    yes, no = sorted(hf.yes_ids), sorted(hf.no_ids)

    def logodds(logits: np.ndarray) -> float:
        lp = logits - np.log(np.exp(logits - logits.max()).sum()) - logits.max()
        return float(np.logaddexp.reduce(lp[yes]) - np.logaddexp.reduce(lp[no]))

    rows = []
    model = hf.model.eval()
    x = torch.tensor([ids])
    with torch.inference_mode():
        t, out = timed(lambda: model(input_ids=x, use_cache=False).logits[0, -1].float().numpy())
    base_lo = logodds(out)
    rows.append(("transformers float32", t, base_lo))

    from derivaudit.models.embedded import resolve_gguf

    llm_be = load_backend("llamacpp", args.model, cache=False, n_threads=args.threads)
    llm = llm_be.llm

    lib = llm_be._llama_cpp.llama_cpp

    def run_llama():  # an empty context each time: the whole prompt is prefilled
        lib.llama_memory_seq_rm(lib.llama_get_memory(llm.ctx), 0, -1, -1)
        llm.n_tokens = 0
        llm.eval(ids)
        return llm_be._last_logprobs()

    t, out = timed(run_llama)
    rows.append((f"llama.cpp {resolve_gguf(args.model)[0].name}", t, logodds(np.asarray(out))))

    class Last(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids):
            # an explicit mask: without one, transformers traces a packed-sequence check (aten::diff)
            # that OpenVINO's PyTorch frontend cannot convert
            mask = torch.ones_like(input_ids)
            return self.m(input_ids=input_ids, attention_mask=mask, use_cache=False).logits[:, -1, :]

    t0 = time.perf_counter()
    with torch.inference_mode():
        ir = ov.convert_model(Last(model), example_input=torch.tensor([ids[:16]]),
                              input=[ov.PartialShape([1, -1])])
    convert_s = time.perf_counter() - t0
    core = ov.Core()
    cfg = {"INFERENCE_NUM_THREADS": args.threads, "PERFORMANCE_HINT": "LATENCY"}
    import nncf

    variants = [("f32", lambda m: m, {"INFERENCE_PRECISION_HINT": "f32"}),
                ("int8 weights", lambda m: nncf.compress_weights(m), {}),
                ]
    if args.int4:
        variants.append(("int4 weights", lambda m: nncf.compress_weights(m, mode=nncf.CompressWeightsMode.INT4_ASYM,
                                                                          group_size=128, ratio=1.0), {}))
    arr = np.array([ids], dtype=np.int64)
    for name, prep, extra in variants:
        t0 = time.perf_counter()
        m = prep(ir.clone() if hasattr(ir, "clone") else ir)
        compiled = core.compile_model(m, "CPU", {**cfg, **extra})
        prep_s = time.perf_counter() - t0
        req = compiled.create_infer_request()
        t, out = timed(lambda req=req: req.infer({0: arr})[0][0].astype(np.float64))
        rows.append((f"openvino {name} (prep {prep_s:.0f}s)", t, logodds(out)))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"model {args.model}; one prompt of {n} tokens, full prefill, {args.threads} threads; "
          f"OpenVINO conversion {convert_s:.0f}s; peak RSS {rss:.1f} GiB")
    print(f"{'engine':44} {'prefill s':>9} {'tok/s':>7} {'x base':>7} {'log-odds':>9} {'|d|':>6}")
    for name, t, lo in rows:
        print(f"{name:44} {t:9.2f} {n / t:7.1f} {rows[0][1] / t:6.2f}x {lo:9.3f} {abs(lo - base_lo):6.3f}")


if __name__ == "__main__":
    main()
