"""Embedding matching at speed: encoder backends, the embedding cache, and their agreement with MiniLM.

Measures, for 1,000 distinct noisy pages (~88 tokens, the length of ALFWorld states) in a batch of
128 trajectories × 50 steps (``benchmarks/matching.py``'s speed batch):

* **new states**: a fresh matcher with the model already loaded (every text encoded);
* **cached**: the same batch again through a warm :class:`~agentgym_credit.embedding.EmbeddingCache`;
* **first call**: a fresh Python process that imports the library and matches the batch (model load
  included; the static table read from the on-disk cache), and the import alone;

for the MiniLM encoder on PyTorch and OpenVINO, the static table distilled from it
(``static:``, :mod:`agentgym_credit.embedding.static`) and difflib for reference. Agreement: on
the Sokoban noise study of ``benchmarks/matching.py`` (noisy pages of real rollouts), the static
threshold is calibrated on the clean setting to the MiniLM ``embedding:0.95`` partition (best ARI
over a grid), then the adjusted Rand index between the two partitions and the Pearson correlation of
the step part of GiGPO's and GraphGPO's advantages (advantage − GRPO) are reported per noise setting,
with each matcher's ARI against the clean states.

Usage: ``python benchmarks/matching_backends.py [--repeats 3] [--groups 16] [--backends ...]``. Writes
``benchmarks/results/matching/matching_backends.{md,json}`` and puts the same tables into ``matching.md``
(between markers, replacing an older copy; rerun after ``benchmarks/matching.py`` rewrites that file). Numbers taken on shared CPUs vary with
the load: the report prints the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentgym_credit.credit import compute_advantages, get_matcher  # noqa: E402
from agentgym_credit.credit.matching import ExactMatcher  # noqa: E402
from agentgym_credit.credit.matching.embedding import EmbeddingMatcher  # noqa: E402
from agentgym_credit.embedding import EmbeddingCache, load_sentence_model  # noqa: E402
from benchmarks.matching import (  # noqa: E402
    QUICK_NOISES,
    add_noise,
    adjusted_rand_index,
    collect_states,
    correlation,
    speed_batch,
    speed_pools,
)

RESULTS = Path(__file__).resolve().parent / "results" / "matching"
ROOT = Path(__file__).resolve().parents[1]
BACKENDS = ("torch", "openvino", "static")
STATIC_GRID = (0.90, 0.95, 0.97, 0.98, 0.99, 0.993, 0.995, 0.997, 0.998, 0.999)
REFERENCE = "embedding:0.95"
STEP_ESTIMATORS = ("gigpo", "graphgpo")

FIRST_CALL = r"""
import sys, time, pickle
t0 = time.perf_counter()
from agentgym_credit.credit import get_matcher
t1 = time.perf_counter()
texts, groups, spec, backend = pickle.load(open(sys.argv[1], "rb"))
m = get_matcher(spec)
if backend:
    from agentgym_credit.credit.matching.embedding import EmbeddingMatcher
    m = EmbeddingMatcher(m.threshold, backend=backend)
t2 = time.perf_counter()
m.cluster(texts, groups)
t3 = time.perf_counter()
print(t1 - t0, t3 - t2)
"""


def _matcher(backend: str, threshold: float, cache: EmbeddingCache | None = None) -> EmbeddingMatcher:
    return EmbeddingMatcher(threshold, model=None if cache else load_sentence_model(device="cpu", backend=backend),
                            cache=cache, backend=backend)


def time_match(matcher: object, batch: object, repeats: int) -> float:
    """Median seconds of ``matcher.match(batch)``."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        matcher.match(batch)
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def first_call(texts: list[str], groups: np.ndarray, spec: str, backend: str | None, tmp: Path) -> tuple[float, float]:
    """(import s, first cluster call s incl. model load) in a fresh process."""
    import pickle

    path = tmp / "first_call.pkl"
    path.write_bytes(pickle.dumps((texts, groups, spec, backend)))
    out = subprocess.run([sys.executable, "-c", FIRST_CALL, str(path)], cwd=ROOT, capture_output=True, text=True,
                         check=True, env={**os.environ, "TQDM_DISABLE": "1"})
    imp, call = map(float, out.stdout.split()[-2:])
    return imp, call


def run_speed(repeats: int, seed: int, backends: tuple[str, ...] = BACKENDS) -> list[dict]:
    source = collect_states("Sokoban-Group-v0", 96, 8, seed + 7, max_steps=50)
    boards = sorted(set(source.state) | set(source.next_state))
    texts = speed_pools(boards, 1000, seed)["noisy pages"]
    batch = speed_batch(texts, 16, 8, 50, seed)
    all_texts = list(batch.state) + list(batch.next_state)
    groups = np.concatenate([batch.group, batch.group])
    rows = []
    tmp = Path(tempfile.mkdtemp(prefix="matching_backends_"))
    configs = [("difflib:0.9", None)] + [(f"embedding:0.95 {b}", b) for b in backends]
    for label, backend in tqdm(configs, desc="speed"):
        row: dict = {"matcher": label, "load_avg": os.getloadavg()[0]}
        if backend is None:
            row["new_s"] = time_match(get_matcher(label), batch, repeats)
            row["cached_s"] = None
            row["import_s"], row["first_s"] = first_call(all_texts, groups, label, None, tmp)
        else:
            load_sentence_model(device="cpu", backend=backend)  # loaded: time the encoding alone
            reps = repeats if backend == "static" else max(1, repeats // 3)  # the transformer: minutes under load
            row["new_s"] = float(np.median([time_match(_matcher(backend, 0.95), batch, 1) for _ in range(reps)]))
            cache = EmbeddingCache(load_sentence_model(device="cpu", backend=backend), backend=backend)
            warm = _matcher(backend, 0.95, cache)
            warm.match(batch)
            row["cached_s"] = time_match(warm, batch, repeats)
            row["import_s"], row["first_s"] = first_call(all_texts, groups, "embedding:0.95", backend, tmp)
        rows.append(row)
    return rows


PREFILTER_BOUNDS = (0.7, 0.8, 0.9)


def quick_ratio_candidates(texts: list[str], groups: np.ndarray, bound: float) -> np.ndarray:
    """Mask of texts with another distinct text of their group at ``difflib`` ``quick_ratio`` ≥ ``bound``.

    ``quick_ratio`` (2 × shared characters as multisets / total length) bounds ``SequenceMatcher.ratio``
    from above. The others are left alone as singleton clusters by :func:`prefiltered_cluster`.
    """
    from difflib import SequenceMatcher

    keep = np.zeros(len(texts), dtype=bool)
    for g in np.unique(groups):
        rows = np.flatnonzero(groups == g)
        distinct = list(dict.fromkeys(texts[i] for i in rows))
        hit = np.zeros(len(distinct), dtype=bool)
        sm = SequenceMatcher(None, autojunk=False)
        for j in range(len(distinct)):
            sm.set_seq2(distinct[j])  # caches the character counts of seq2
            for i in range(j):
                if hit[i] and hit[j]:
                    continue
                sm.set_seq1(distinct[i])
                if sm.real_quick_ratio() >= bound and sm.quick_ratio() >= bound:
                    hit[i] = hit[j] = True
        chosen = {t for t, h in zip(distinct, hit, strict=True) if h}
        keep[rows] = [texts[i] in chosen for i in rows]
    return keep


def prefiltered_cluster(matcher: EmbeddingMatcher, texts: list[str], groups: np.ndarray, bound: float) -> np.ndarray:
    """Cluster ids where only :func:`quick_ratio_candidates` are encoded; the rest are singletons."""
    keep = quick_ratio_candidates(texts, groups, bound)
    ids = np.full(len(texts), -1, dtype=np.int64)
    if keep.any():
        ids[keep] = matcher.cluster([t for t, k in zip(texts, keep, strict=True) if k], groups[keep])
    rest = np.flatnonzero(~keep)
    if len(rest):
        _, inverse = np.unique(np.asarray([texts[i] for i in rest], dtype=object), return_inverse=True)
        ids[rest] = ids.max() + 1 + inverse  # cluster ids need only be distinct within a group
    return ids


def run_prefilter(seed: int, backends: tuple[str, ...]) -> list[dict]:
    """Speed and cluster change of the quick_ratio prefilter on the speed batch, per backend and bound."""
    source = collect_states("Sokoban-Group-v0", 96, 8, seed + 7, max_steps=50)
    boards = sorted(set(source.state) | set(source.next_state))
    rows = []
    for pool in ("noisy pages",):
        texts = speed_pools(boards, 1000, seed)[pool]
        batch = speed_batch(texts, 16, 8, 50, seed)
        all_texts = list(batch.state) + list(batch.next_state)
        groups = np.concatenate([batch.group, batch.group])
        for backend in backends:
            load_sentence_model(device="cpu", backend=backend)
            start = time.perf_counter()
            full = _matcher(backend, 0.95).cluster(all_texts, groups)
            full_s = time.perf_counter() - start
            for bound in tqdm(PREFILTER_BOUNDS, desc=f"prefilter {backend}"):
                start = time.perf_counter()
                keep = quick_ratio_candidates(all_texts, groups, bound)
                filter_s = time.perf_counter() - start
                start = time.perf_counter()
                ids = prefiltered_cluster(_matcher(backend, 0.95), all_texts, groups, bound)
                total_s = time.perf_counter() - start
                rows.append({"pool": pool, "backend": backend, "bound": bound, "load_avg": os.getloadavg()[0],
                             "distinct": len(set(all_texts)),
                             "encoded": len({t for t, k in zip(all_texts, keep, strict=True) if k}),
                             "filter_s": filter_s, "total_s": total_s, "full_s": full_s,
                             "ari_vs_full": adjusted_rand_index(ids, full),
                             "changed_rows": int(np.sum(~_same_partition_rows(ids, full)))})
    return rows


def _same_partition_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per row: is its cluster the same set of rows under both labelings?"""
    out = np.empty(len(a), dtype=bool)
    for i in range(len(a)):
        out[i] = np.array_equal(a == a[i], b == b[i])
    return out


def _prefilter_table(rows: list[dict]) -> list[str]:
    lines = [
        "",
        "## difflib quick_ratio prefilter",
        "",
        "Only texts with another distinct text of their group at `quick_ratio` ≥ bound are encoded and "
        "clustered (`embedding:0.95`); the others stay singletons. Same batch as the speed table. prefilter s: "
        "the pairwise `quick_ratio` pass alone; with prefilter s: that pass + encoding and clustering the "
        "candidates (fresh matcher, model loaded); without s: encoding and clustering every text; ARI / rows "
        "changed: the prefiltered partition against the full one.",
        "",
        "| backend | bound | load avg | encoded / distinct | prefilter s | with prefilter s | without s | "
        "ARI vs full | rows changed |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['backend']} | {r['bound']:g} | {r['load_avg']:.1f} | {r['encoded']} / {r['distinct']} | "
                     f"{r['filter_s']:.3f} | {r['total_s']:.3f} | {r['full_s']:.3f} | {r['ari_vs_full']:.3f} | "
                     f"{r['changed_rows']} |")
    return lines


ENVS = {"sokoban": ("Sokoban", "Sokoban-Group-v0", 8, {}), "alfworld": ("ALFWorld", "ALFWorld-Group-v0", 4,
                                                                        {"max_steps": 20})}


def agreement_settings(clean: object, env: str, reference: EmbeddingCache, candidate: EmbeddingCache,
                       grid: tuple[float, ...], seed: int, key: str = "static") -> list[dict]:
    """Per noise setting and ``candidate`` threshold: agreement with the ``reference`` ``embedding:0.95``.

    Each setting holds the reference partition's ARI against the clean states and cluster count, and under
    ``key`` one entry per threshold of ``grid``: ARI against the reference and the clean states, cluster
    count, and the Pearson correlation of the step part of GiGPO's and GraphGPO's advantages.
    """
    clean_ids = np.concatenate([ExactMatcher().match(clean).state, ExactMatcher().match(clean).next_state])
    episode = compute_advantages(clean, "grpo")
    params = {"gigpo": {}, "graphgpo": {"omega": env}}
    settings = []
    for k, noise in enumerate(tqdm(QUICK_NOISES, desc="noise settings")):
        noisy = clean if noise.name == "clean" else add_noise(clean, noise, seed + 1 + k)
        ref = EmbeddingMatcher(0.95, cache=reference, backend=reference.backend)
        ref_match = ref.match(noisy)
        ref_ids = np.concatenate([ref_match.state, ref_match.next_state])
        ref_step = {n: compute_advantages(noisy, n, matcher=ref, **params[n]) - episode for n in STEP_ESTIMATORS}
        per_threshold = {}
        for thr in grid:
            m = EmbeddingMatcher(thr, cache=candidate, backend=candidate.backend)
            matched = m.match(noisy)
            ids = np.concatenate([matched.state, matched.next_state])
            entry = {"ari_vs_minilm": adjusted_rand_index(ids, ref_ids), "ari_vs_clean": adjusted_rand_index(ids, clean_ids),
                     "clusters": int(len(np.unique(ids)))}
            for n in STEP_ESTIMATORS:
                entry[f"step_corr_{n}"] = correlation(compute_advantages(noisy, n, matcher=m, **params[n]) - episode,
                                                      ref_step[n])
            per_threshold[thr] = entry
        settings.append({"noise": noise.name, "minilm_ari_vs_clean": adjusted_rand_index(ref_ids, clean_ids),
                         "minilm_clusters": int(len(np.unique(ref_ids))), key: per_threshold})
    return settings


def run_agreement(groups: int, seed: int, env: str = "sokoban") -> dict:
    label, env_id, group_size, kwargs = ENVS[env]
    clean = collect_states(env_id, groups, group_size, seed, **kwargs)
    minilm = EmbeddingCache(load_sentence_model(device="cpu", backend="openvino"), backend="openvino")
    static = EmbeddingCache(load_sentence_model(device="cpu", backend="static"), backend="static")
    settings = agreement_settings(clean, env, minilm, static, STATIC_GRID, seed)
    best = max(STATIC_GRID, key=lambda t: np.mean([s["static"][t]["ari_vs_minilm"] for s in settings]))
    return {"env": label, "seed": seed, "rows": len(clean), "groups": groups, "group_size": group_size,
            "calibrated_threshold": best, "settings": settings}


def calibrate(agreements: list[dict]) -> float:
    """The grid threshold with the best mean ARI against MiniLM over every setting of ``agreements``."""
    settings = [s for a in agreements for s in a["settings"]]
    return max(STATIC_GRID, key=lambda t: np.mean([s["static"][t]["ari_vs_minilm"] for s in settings]))


def out_of_sample(calibration: list[dict], held_out: list[dict]) -> dict:
    """θ calibrated on the ``calibration`` pages, scored on the ``held_out`` pages (other rooms/games).

    Returns:
        ``{"threshold": θ, "rows": [...]}`` with, per held-out env and noise setting, the agreement at
        θ and at the threshold that would have been best on the held-out pages themselves.
    """
    theta = calibrate(calibration)
    rows = []
    for agreement in held_out:
        best = calibrate([agreement])
        for s in agreement["settings"]:
            at, oracle = s["static"][theta], s["static"][best]
            rows.append({"env": agreement["env"], "seed": agreement["seed"], "noise": s["noise"],
                         "ari_vs_minilm": at["ari_vs_minilm"], "step_corr_gigpo": at["step_corr_gigpo"],
                         "step_corr_graphgpo": at["step_corr_graphgpo"], "held_out_best_threshold": best,
                         "held_out_best_ari": oracle["ari_vs_minilm"]})
    return {"threshold": theta, "calibration": [(a["env"], a["seed"]) for a in calibration], "rows": rows}


def _out_of_sample_table(result: dict) -> list[str]:
    cal = ", ".join(f"{env} seed {seed}" for env, seed in result["calibration"])
    lines = [
        "",
        "## Out-of-sample calibration of the static threshold",
        "",
        f"θ = {result['threshold']:g} is the grid threshold with the best mean ARI against MiniLM `{REFERENCE}` on "
        f"the calibration pages ({cal}: every noise setting of both studies above). The held-out pages below "
        "come from other rooms and games (task groups reset with other seeds) and are scored at that θ; the last "
        "two columns give the threshold that would have been best on the held-out pages themselves (in-sample) "
        "and its ARI.",
        "",
        "| held-out pages | noise | ARI vs MiniLM at θ | step corr GiGPO | step corr GraphGPO | "
        "best θ held-out | its ARI |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in result["rows"]:
        lines.append(f"| {r['env']} seed {r['seed']} | {r['noise']} | {r['ari_vs_minilm']:.3f} | "
                     f"{r['step_corr_gigpo']:.3f} | {r['step_corr_graphgpo']:.3f} | "
                     f"{r['held_out_best_threshold']:g} | {r['held_out_best_ari']:.3f} |")
    return lines


def report(speed: list[dict], agreements: list[dict], repeats: int, command: str,
           holdout: dict | None = None, prefilter: list[dict] | None = None) -> str:
    def f(x: float | None, d: int = 3) -> str:
        return "–" if x is None else f"{x:.{d}f}"

    lines = [
        "# Embedding matching at speed: backends, cache, agreement with MiniLM",
        "",
        f"Command: `{command}` (2 CPU cores shared with other jobs: the load average "
        "is printed per row; timings under such contention vary by 2× or more).",
        "",
        "## Speed",
        "",
        "Batch: 128 trajectories × 50 steps, 1,000 distinct noisy pages (~88 tokens). new s: fresh matcher, "
        f"model loaded, every text encoded (median of {repeats} for the static table, of {max(1, repeats // 3)} for "
        "MiniLM); cached s: the same batch through a warm "
        "`EmbeddingCache`; first call s: a fresh process's first `cluster` call including the model load "
        "(the static table read from its on-disk cache); import s: `import agentgym_credit.credit` in that "
        "process. Targets: new ≤ 1 s, cached ≤ 0.1 s, first call ≤ 3 s.",
        "",
        "| matcher | load avg | new s | cached s | first call s | import s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in speed:
        lines.append(f"| {r['matcher']} | {r['load_avg']:.1f} | {f(r['new_s'])} | {f(r['cached_s'])} | "
                     f"{f(r['first_s'])} | {f(r['import_s'])} |")
    if prefilter:
        lines += _prefilter_table(prefilter)
    for agreement in agreements:
        lines += _agreement_table(agreement)
    if holdout is not None:
        lines += _out_of_sample_table(holdout)
    return "\n".join(lines) + "\n"


def _agreement_table(agreement: dict) -> list[str]:
    def f(x: float | None, d: int = 3) -> str:
        return "–" if x is None else f"{x:.{d}f}"

    thr = agreement["calibrated_threshold"]
    lines = [
        "",
        f"## Agreement of the static table with MiniLM: {agreement.get('env', 'Sokoban')}",
        "",
        f"{agreement.get('env', 'Sokoban')} noise study ({agreement['groups']} groups × "
        f"{agreement.get('group_size', 8)}, {agreement['rows']} rows). Reference: MiniLM "
        f"`{REFERENCE}`. The static threshold is calibrated on these same settings (best mean ARI against the "
        f"reference partition over the grid {', '.join(f'{t:g}' for t in STATIC_GRID)}; in-sample): θ = {thr:g}. ARI vs MiniLM: adjusted Rand index between the static and the "
        "MiniLM partitions of all observations; step corr: Pearson correlation of the step part of the "
        "advantages (advantage − GRPO) with the static matcher against the MiniLM matcher; ARI vs clean: each "
        "partition against the clean states' exact clusters.",
        "",
        "| noise | static θ | ARI vs MiniLM | step corr GiGPO | step corr GraphGPO | ARI vs clean (static) | "
        "ARI vs clean (MiniLM) | clusters static / MiniLM |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for s in agreement["settings"]:
        for t in sorted({thr, 0.95, 0.99, 0.999}):
            e = s["static"][t]
            lines.append(f"| {s['noise']} | {t:g}{' (calibrated)' if t == thr else ''} | {f(e['ari_vs_minilm'])} | "
                         f"{f(e['step_corr_gigpo'])} | {f(e['step_corr_graphgpo'])} | {f(e['ari_vs_clean'])} | "
                         f"{f(s['minilm_ari_vs_clean'])} | {e['clusters']} / {s['minilm_clusters']} |")
    return lines


BEGIN, END = "<!-- matching_backends: begin -->", "<!-- matching_backends: end -->"


def update_matching_report(text: str) -> None:
    """Put this report, one heading level down, into ``matching.md`` between markers (replacing an older one)."""
    path = RESULTS / "matching.md"
    old = path.read_text() if path.exists() else ""
    section = "\n".join(("#" + line) if line.startswith("#") else line for line in text.splitlines())
    block = f"{BEGIN}\n{section}\n{END}\n"
    if BEGIN in old and END in old:
        new = old[: old.index(BEGIN)] + block + old[old.index(END) + len(END) + 1 :]
    else:
        new = old.rstrip("\n") + "\n\n" + block
    path.write_text(new)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--groups", type=int, default=16, help="Sokoban task groups (ALFWorld: 4 × 4 members)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--backends", nargs="*", default=list(BACKENDS), choices=BACKENDS)
    ap.add_argument("--envs", nargs="+", default=["sokoban", "alfworld"], choices=sorted(ENVS))
    ap.add_argument("--prefilter", nargs="*", default=["static", "openvino"], choices=BACKENDS,
                    help="backends to measure the quick_ratio prefilter with (none: skip it)")
    ap.add_argument("--holdout-seed", type=int, default=1000,
                    help="reset seed of the held-out pages for the out-of-sample calibration (negative: skip it)")
    ap.add_argument("--keep-speed", nargs="*", default=[], help="speed rows to keep from the previous results")
    args = ap.parse_args(argv)
    speed = run_speed(args.repeats, args.seed, tuple(args.backends)) if args.backends else []
    if args.keep_speed:  # rows of an earlier run (e.g. the slow transformer backends), marked by their load
        earlier = json.loads((RESULTS / "matching_backends.json").read_text())["speed"]
        speed += [r for r in earlier if r["matcher"] in args.keep_speed]
    prefilter = run_prefilter(args.seed, tuple(args.prefilter)) if args.prefilter else []
    agreement = [run_agreement(args.groups if env == "sokoban" else 4, args.seed, env) for env in args.envs]
    holdout = None
    if args.holdout_seed >= 0:
        held = [run_agreement(args.groups if env == "sokoban" else 4, args.holdout_seed, env) for env in args.envs]
        holdout = out_of_sample(agreement, held)
    command = shlex.join(["python", "benchmarks/matching_backends.py", *(argv if argv is not None else sys.argv[1:])])
    text = report(speed, agreement, args.repeats, command, holdout, prefilter)
    print(text)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "matching_backends.md").write_text(text)
    update_matching_report(text)
    result = {"speed": speed, "agreement": agreement, "out_of_sample": holdout, "prefilter": prefilter}
    (RESULTS / "matching_backends.json").write_text(json.dumps(result, indent=2, default=str))
    return result


if __name__ == "__main__":
    main()
