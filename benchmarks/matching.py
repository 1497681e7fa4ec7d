"""State matching under observation noise: exact vs difflib vs embedding matchers on Sokoban states.

Real observations are noisy, so exact matching stops finding shared states and the step-level
estimators (GiGPO, SALT, GraphGPO) degrade to GRPO. This benchmark records real Sokoban rollouts
(``SokobanEnv`` members driven by the ε-optimal oracle, ``info["anchor"]`` as the clean state), turns
every observation into a small "page" and injects noise into it:

* advertisements as in GraphGPO's noisy WebShop (arXiv:2605.26684, App. D.3): with probability ``p``
  a page receives ``q`` random advertisement sentences at random lines;
* list reordering: the page's list of available moves comes in a random order;
* numeric jitter: a status line with a changing clock time, latency and a visitor counter.

Each observation of a trajectory is noised once, so the ``next_state`` of a step and the ``state`` of
the following step stay the same text, as in a real rollout. For every noise setting and matcher it
reports the adjusted Rand index (ARI) of the matched states against the clean states' exact clusters,
the number of clusters, the Pearson correlation of GiGPO / SALT / GraphGPO advantages computed on the
noisy batch with that matcher against the same estimator on the clean batch with exact matching —
for the whole advantage and for its step part (the advantage minus the GRPO episode advantage, which
no matcher changes) — and the matching time per batch. Embedding matchers of one noise setting share an ``EmbeddingCache``: the
distinct texts are encoded once, and the reported time is that encoding plus the matcher's own FAISS
and clustering time.

A speed section times the matching of a batch of 128 trajectories × 50 steps with 1,000 distinct
states (model already loaded; target ≤ 3 s including encoding on 2 CPU cores) and the FAISS part alone.

Usage: ``python benchmarks/matching.py [--quick] [--groups 16 --group-size 8 --seed 0]``.
Writes ``benchmarks/results/matching/matching.{md,png,json}``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass
from difflib import SequenceMatcher
from pathlib import Path

import numpy as np
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gymnasium as gym  # noqa: E402

import agentgym_credit  # noqa: E402,F401  (registers the environments)
from agentgym_credit.credit import compute_advantages, get_matcher  # noqa: E402
from agentgym_credit.credit.grouping import dense_ids  # noqa: E402
from agentgym_credit.credit.matching import ExactMatcher, StateMatcher  # noqa: E402
from agentgym_credit.credit.matching.embedding import EmbeddingMatcher, range_neighbours  # noqa: E402
from agentgym_credit.embedding import EmbeddingCache, load_sentence_model  # noqa: E402
from agentgym_credit.embedding.openvino import openvino_available  # noqa: E402
from agentgym_credit.envs.sokoban import ACTIONS, EpsilonOraclePolicy  # noqa: E402
from agentgym_credit.machine import cpu_has_native_bf16  # noqa: E402
from agentgym_credit.records import StepBatch  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "matching"

ADVERTISEMENTS = (
    "Sponsored: upgrade to Puzzle Pro today and get 30% off your first three months!",
    "Limited time offer: free shipping on all wooden crates, this weekend only.",
    "Ad: Tired of pushing boxes? Try WarehouseBot, the robot that lifts for you.",
    "Hot deal! Noise-cancelling headphones from $49.99, while stocks last.",
    "Sponsored: learn Python in 30 days with our award-winning online course.",
    "Get the new StrategyMaster app: 1,000 brain teasers, no ads, one price.",
    "Advertisement: Summer sale on garden furniture, up to 50% off selected items.",
    "Promoted: your credit score could be better. Check it for free in two minutes.",
    "Don't miss out: concert tickets for the Midnight Owls tour go on sale Friday.",
    "Sponsored: fresh coffee beans delivered to your door every week, cancel anytime.",
    "Special offer: buy two puzzle books, get the third one free.",
    "Ad: Book your dream vacation now and save up to $300 per person.",
    "Try CloudDrive Plus free for 60 days: 2 TB of storage for all your files.",
    "New in store: ergonomic office chairs with lumbar support from $129.",
    "Sponsored: the smartwatch that tracks your sleep, steps and heart rate.",
    "Flash sale ends tonight: 25% off all running shoes with code FAST25.",
)


@dataclass(frozen=True)
class Noise:
    """A noise setting.

    Attributes:
        name: label in the tables.
        p: probability that a page receives advertisements.
        q: advertisements inserted into such a page.
        reorder: shuffle the page's list of available moves.
        jitter: add a status line with a changing time, latency and counter.
    """

    name: str
    p: float = 0.0
    q: int = 0
    reorder: bool = False
    jitter: bool = False


NOISES = (
    Noise("clean"),
    Noise("ads q=1 p=0.3", p=0.3, q=1),
    Noise("ads q=1 p=0.6", p=0.6, q=1),
    Noise("ads q=2 p=0.3", p=0.3, q=2),
    Noise("ads q=2 p=0.6", p=0.6, q=2),
    Noise("reorder", reorder=True),
    Noise("jitter", jitter=True),
    Noise("all (q=2 p=0.6 + reorder + jitter)", p=0.6, q=2, reorder=True, jitter=True),
)
QUICK_NOISES = (NOISES[0], NOISES[2], NOISES[-1])
MATCHERS = (
    "exact",
    "difflib:0.8",
    "difflib:0.9",
    "difflib:0.95",
    "embedding:0.9",
    "embedding:0.95",
    "embedding:0.98",
    "embedding:0.99",
)
QUICK_MATCHERS = ("exact", "difflib:0.9", "embedding:0.95", "embedding:0.99")
ESTIMATORS = {"gigpo": {}, "salt": {}, "graphgpo": {"omega": "sokoban"}}


class PlannerPolicy:
    """ALFWorld's ε-noisy planner oracle: the planner's next command, a random admissible one with prob. ε."""

    def __init__(self, epsilon: float, seed: int) -> None:
        self.epsilon = float(epsilon)
        self.rng = np.random.default_rng(seed)

    def act(self, env: gym.Env) -> str:
        member = env.unwrapped
        admissible = list(member._last_info.get("admissible_actions", [])) or ["look"]
        expert = member.expert_next_action()
        if expert is None or self.rng.random() < self.epsilon:
            return admissible[int(self.rng.integers(len(admissible)))]
        return expert


def collect_states(
    env_id: str = "Sokoban-Group-v0",
    groups: int = 16,
    group_size: int = 8,
    seed: int = 0,
    *,
    epsilons: tuple[float, float] = (0.2, 0.9),
    **env_kwargs: object,
) -> StepBatch:
    """Roll out ``groups × group_size`` members of ``env_id`` with the ε-optimal oracle.

    Members of group ``g`` are reset with seed ``seed + g`` (same room); member ``k`` plays with
    ε spread evenly over ``epsilons`` so that a group holds good and bad trajectories.

    Returns:
        The clean :class:`StepBatch` (``state`` / ``next_state`` are the env's ``info["anchor"]``).
    """
    cols: dict[str, list] = {k: [] for k in ("group", "traj", "t", "state", "action", "next_state",
                                            "reward", "done", "success", "valid")}
    eps = np.linspace(epsilons[0], epsilons[1], group_size)
    traj = 0
    env = gym.make(env_id, **env_kwargs)
    try:
        for g in range(groups):
            for k in range(group_size):
                policy_seed = seed * 100_003 + g * 1_009 + k
                policy = (PlannerPolicy(float(eps[k]), policy_seed) if env_id.startswith("ALFWorld")
                          else EpsilonOraclePolicy(float(eps[k]), seed=policy_seed))
                _, info = env.reset(seed=seed + g)
                anchor, t, done = info["anchor"], 0, False
                while not done:
                    action = policy.act(env)
                    _, reward, terminated, truncated, info = env.step(action)
                    done = bool(terminated or truncated)
                    cols["group"].append(g)
                    cols["traj"].append(traj)
                    cols["t"].append(t)
                    cols["state"].append(anchor)
                    cols["action"].append(action)
                    cols["next_state"].append(info["anchor"])
                    cols["reward"].append(float(reward))
                    cols["done"].append(done)
                    cols["valid"].append(bool(info["action_valid"]))
                    anchor, t = info["anchor"], t + 1
                cols["success"].extend([bool(info["won"])] * t)
                traj += 1
    finally:
        env.close()
    return StepBatch(**cols)


def noisy_page(anchor: str, noise: Noise, rng: np.random.Generator) -> str:
    """One observation page: the board, the list of moves, and the noise of ``noise``."""
    moves = list(ACTIONS)
    if noise.reorder:
        moves = [moves[i] for i in rng.permutation(len(moves))]
    lines = anchor.split("\n") + [f"Available moves: {', '.join(moves)}."]
    if noise.jitter:
        h, m, s = rng.integers(8, 20), rng.integers(60), rng.integers(60)
        lines.append(f"Server time {h:02d}:{m:02d}:{s:02d}, latency {rng.integers(5, 250)} ms, "
                     f"visitors online: {rng.integers(100, 10_000)}.")
    if noise.q and rng.random() < noise.p:
        for ad in rng.choice(len(ADVERTISEMENTS), size=noise.q, replace=False):
            lines.insert(int(rng.integers(len(lines) + 1)), ADVERTISEMENTS[ad])
    return "\n".join(lines)


def add_noise(batch: StepBatch, noise: Noise, seed: int) -> StepBatch:
    """The batch with every observation replaced by a noisy page (one page per observation)."""
    rng = np.random.default_rng(seed)
    n = len(batch)
    order, starts = batch.order, batch.traj_starts
    state, nxt = list(batch.state), list(batch.next_state)
    ends = np.append(starts[1:], n)
    for s, e in zip(starts, ends, strict=True):
        rows = order[s:e]
        pages = [noisy_page(batch.state[r], noise, rng) for r in rows] + [
            noisy_page(batch.next_state[rows[-1]], noise, rng)]
        for k, r in enumerate(rows):
            state[r], nxt[r] = pages[k], pages[k + 1]
    cols = batch.to_dict()
    cols.update(state=state, next_state=nxt)
    return StepBatch(**cols)


def adjusted_rand_index(a: np.ndarray, b: np.ndarray) -> float:
    """Adjusted Rand index of two labelings (Hubert & Arabie), 1.0 for identical partitions.

    .. math:: ARI = \\frac{\\sum_{ij} \\binom{n_{ij}}{2} - E}{\\tfrac12 [\\sum_i \\binom{a_i}{2} +
              \\sum_j \\binom{b_j}{2}] - E}, \\quad E = \\frac{\\sum_i \\binom{a_i}{2} \\sum_j
              \\binom{b_j}{2}}{\\binom{n}{2}}
    """
    n = len(a)
    if n < 2:
        return 1.0
    pair, _ = dense_ids(a, b)
    ia, _ = dense_ids(a)
    ib, _ = dense_ids(b)

    def comb2(x: np.ndarray) -> float:
        x = x.astype(np.float64)
        return float((x * (x - 1) / 2).sum())

    index = comb2(np.bincount(pair))
    sa, sb = comb2(np.bincount(ia)), comb2(np.bincount(ib))
    expected = sa * sb / (n * (n - 1) / 2)
    top = (sa + sb) / 2
    return 1.0 if top == expected else (index - expected) / (top - expected)


def correlation(x: np.ndarray, y: np.ndarray) -> float:
    """Pearson correlation of ``x`` with the reference ``y``.

    A constant ``x`` against a varying reference (e.g. a step part that is identically zero because the
    estimator degraded to GRPO) scores 0; nan when the reference itself is constant.
    """
    if len(x) < 2 or np.std(y) == 0:
        return float("nan")
    if np.std(x) == 0:
        return 0.0
    return float(np.corrcoef(x, y)[0, 1])


def build_matcher(spec: str, cache: EmbeddingCache | None) -> StateMatcher:
    m = get_matcher(spec)
    if isinstance(m, EmbeddingMatcher):
        return EmbeddingMatcher(m.threshold, cache=cache)
    return m


def state_ids(matcher: StateMatcher, batch: StepBatch) -> tuple[np.ndarray, float]:
    """Ids of every observation (state and next_state columns) and the matching time."""
    start = time.perf_counter()
    matched = matcher.match(batch)
    elapsed = time.perf_counter() - start
    if isinstance(matcher, EmbeddingMatcher):  # time with the shared cache: add the encoding separately
        elapsed = matcher.last_timings["faiss_s"] + matcher.last_timings["cluster_s"]
    return np.concatenate([matched.state, matched.next_state]), elapsed


def run_noise_study(clean: StepBatch, noises: tuple[Noise, ...], matchers: tuple[str, ...], seed: int,
                    model: object) -> list[dict]:
    clean_ids = np.concatenate([ExactMatcher().match(clean).state, ExactMatcher().match(clean).next_state])
    reference = {name: compute_advantages(clean, name, **kw) for name, kw in ESTIMATORS.items()}
    episode = compute_advantages(clean, "grpo")  # rewards are the same in every noisy batch
    rows = []
    bar = tqdm(total=len(noises) * len(matchers), desc="noise × matcher")
    for k, noise in enumerate(noises):
        noisy = add_noise(clean, noise, seed + 1 + k)
        cache = EmbeddingCache(model)
        t0 = time.perf_counter()
        cache.encode(sorted(set(noisy.state) | set(noisy.next_state) | set(noisy.action)))
        encode_s = time.perf_counter() - t0
        for spec in matchers:
            bar.set_postfix_str(f"{noise.name[:16]} / {spec}")
            matcher = build_matcher(spec, cache)
            ids, match_s = state_ids(matcher, noisy)
            if isinstance(matcher, EmbeddingMatcher):
                match_s += encode_s
            row = {
                "noise": noise.name,
                "matcher": spec,
                "ari": adjusted_rand_index(ids, clean_ids),
                "clusters": int(len(np.unique(ids))),
                "clean_clusters": int(len(np.unique(clean_ids))),
                "match_s": match_s,
            }
            for name, kw in ESTIMATORS.items():
                adv = compute_advantages(noisy, name, matcher=matcher, **kw)
                row[f"corr_{name}"] = correlation(adv, reference[name])
                row[f"step_corr_{name}"] = correlation(adv - episode, reference[name] - episode)
            rows.append(row)
            bar.update()
    bar.close()
    return rows


def speed_batch(pool_texts: list[str], groups: int, trajs: int, steps: int, seed: int) -> StepBatch:
    """``groups × trajs`` walks of ``steps`` steps that visit every text of ``pool_texts`` (split into groups)."""
    rng = np.random.default_rng(seed)
    cols: dict[str, list] = {k: [] for k in ("group", "traj", "t", "state", "action", "next_state",
                                            "reward", "done", "success", "valid")}
    traj = 0
    n = len(pool_texts)
    for g in range(groups):
        pool = pool_texts[g * n // groups:(g + 1) * n // groups]
        need = trajs * (steps + 1)
        seq = np.concatenate([rng.permutation(len(pool)) for _ in range(-(-need // len(pool)))])[:need]
        for k in range(trajs):
            obs = seq[k * (steps + 1):(k + 1) * (steps + 1)]
            won = bool(rng.random() < 0.5)
            for t in range(steps):
                cols["group"].append(g)
                cols["traj"].append(traj)
                cols["t"].append(t)
                cols["state"].append(pool[obs[t]])
                cols["action"].append(ACTIONS[int(rng.integers(4))])
                cols["next_state"].append(pool[obs[t + 1]])
                cols["reward"].append(10.0 if (won and t == steps - 1) else 0.0)
                cols["done"].append(t == steps - 1)
                cols["success"].append(won)
                cols["valid"].append(True)
            traj += 1
    return StepBatch(**cols)


def speed_pools(boards: list[str], distinct: int, seed: int) -> dict[str, list[str]]:
    """``distinct`` texts of two kinds: clean board pages and fully noisy pages."""
    rng = np.random.default_rng(seed)
    if len(boards) < distinct:
        raise RuntimeError(f"only {len(boards)} distinct boards for the speed batch; collect more rollouts")
    picked = [boards[i] for i in rng.choice(len(boards), size=distinct, replace=False)]
    return {
        "boards": [noisy_page(b, NOISES[0], rng) for b in picked],
        "noisy pages": [noisy_page(b, NOISES[-1], rng) for b in picked],
    }


def matmul_gflop_per_token(model: object) -> float:
    """GFLOP of the transformer's weight matrix products per token: 2 × its parameters outside the embeddings.

    Attention score products add ``4 · L · d`` per token and layer (under 10% here); left out, so the
    figure is a lower bound of the arithmetic.
    """
    bert = model[0].auto_model  # type: ignore[index]
    params = sum(p.numel() for n, p in bert.named_parameters()
                 if not n.startswith(("embeddings", "pooler")) and p.dim() == 2)
    return 2.0 * params / 1e9


#: Why quick mode leaves PyTorch's bf16 out on a CPU without native bf16 (the full run still times it).
EMULATED_BF16 = ("not timed in quick mode: this CPU has no native bf16 (AMX-BF16 / AVX512-BF16), so PyTorch "
                 "emulates it, about 7× slower than float32 (6 min of a quick run on a 2-core AVX2 EPYC); "
                 "the full run times it")


def speed_encoders(emulated_bf16: bool = True) -> list[tuple[str, object, str]]:
    """``(label, loaded model, precision)`` for every backend and precision available here.

    Args:
        emulated_bf16: include PyTorch in bf16 where the CPU has no native bf16 (:func:`cpu_has_native_bf16`).
    """
    torch_model = load_sentence_model(device="cpu", backend="torch")
    encoders = [("torch float32", torch_model, "float32")]
    if emulated_bf16 or cpu_has_native_bf16():
        encoders.append(("torch bfloat16", torch_model, "bfloat16"))
    if openvino_available():
        ov = load_sentence_model(device="cpu", backend="openvino")
        encoders += [("openvino float32", ov, "float32"), ("openvino bfloat16", ov, "bfloat16")]
    return encoders


def run_speed(boards: list[str], repeats: int, seed: int, emulated_bf16: bool = True) -> dict:
    """Time matching of 128 trajectories × 50 steps over 1,000 distinct states, and FAISS alone.

    ``emulated_bf16=False`` leaves PyTorch's bf16 out where the CPU would emulate it (``not_timed`` says why).
    """
    out: dict = {"cpu_count": os.cpu_count(), "kinds": {}, "not_timed": {}}
    try:
        import torch

        out["torch_threads"] = torch.get_num_threads()
    except ImportError:  # pragma: no cover
        pass
    encoders = speed_encoders(emulated_bf16)
    if "torch bfloat16" not in [label for label, _, _ in encoders]:
        out["not_timed"]["embedding:0.95 torch bfloat16"] = EMULATED_BF16
    model = encoders[0][1]
    tokenizer = getattr(model, "tokenizer", None)
    gflop_per_token = matmul_gflop_per_token(model)
    specs = [("exact", ExactMatcher), ("difflib:0.9", lambda: get_matcher("difflib:0.9"))]
    specs += [(f"embedding:0.95 {label}", lambda m=m, p=p: EmbeddingMatcher(0.95, model=m, precision=p))
              for label, m, p in encoders]
    pools = speed_pools(boards, 1000, seed)
    bar = tqdm(total=len(pools) * len(specs), desc="speed")
    for kind, pool in pools.items():
        batch = speed_batch(pool, groups=16, trajs=8, steps=50, seed=seed)
        tokens = [len(ids) for ids in tokenizer(pool)["input_ids"]] if tokenizer is not None else [0]
        res: dict = {
            "rows": len(batch),
            "trajectories": batch.num_trajectories,
            "distinct_states": len(set(batch.state) | set(batch.next_state)),
            "mean_chars": float(np.mean([len(t) for t in pool])),
            "mean_tokens": float(np.mean(tokens)),
            "matmul_gflop": gflop_per_token * float(np.sum(tokens)),
            "median_s": {},
            "parts_median_s": {},
            "load_avg": os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan"),
        }
        for label, make in specs:
            times, parts = [], {}
            for _ in range(repeats):
                matcher = make()  # fresh matcher: no embedding is reused between repeats
                start = time.perf_counter()
                matcher.match(batch)
                times.append(time.perf_counter() - start)
                if isinstance(matcher, EmbeddingMatcher):
                    for key, val in matcher.last_timings.items():
                        parts.setdefault(key, []).append(val)
            res["median_s"][label] = statistics.median(times)
            if parts:
                res["parts_median_s"][label] = {k: statistics.median(v) for k, v in parts.items()}
            bar.update()
        # FAISS alone: per-group range search over precomputed embeddings
        texts = sorted(set(batch.state) | set(batch.next_state))
        emb = dict(zip(texts, EmbeddingMatcher(0.95, model=model).encode(texts), strict=True))
        per_group = []
        for g in np.unique(batch.group):
            rows = np.flatnonzero(batch.group == g)
            group_texts = sorted({batch.state[r] for r in rows} | {batch.next_state[r] for r in rows})
            per_group.append(np.stack([emb[t] for t in group_texts]))
        faiss_times = []
        for _ in range(max(repeats, 5)):
            start = time.perf_counter()
            for x in per_group:
                range_neighbours(x, 0.95)
            faiss_times.append(time.perf_counter() - start)
        res["faiss_only_s"] = statistics.median(faiss_times)
        out["kinds"][kind] = res
    bar.close()
    return out


def separability(clean: StepBatch, noises: tuple[Noise, ...], model: object, seed: int,
                 max_boards: int = 60) -> list[dict]:
    """Similarity of two noisy copies of one board vs. of a board and its most similar other board.

    A threshold can only recover the clean boards when the first is above the second.
    """
    rng = np.random.default_rng(seed)
    boards = sorted(set(clean.state) | set(clean.next_state))
    if len(boards) > max_boards:
        boards = [boards[i] for i in np.sort(rng.choice(len(boards), size=max_boards, replace=False))]
    out = []
    for noise in noises:
        a = [noisy_page(b, noise, rng) for b in boards]
        b = [noisy_page(x, noise, rng) for x in boards]
        ea, eb = EmbeddingMatcher(0.5, model=model).encode(a), EmbeddingMatcher(0.5, model=model).encode(b)
        sims = ea @ ea.T
        np.fill_diagonal(sims, -np.inf)
        ratio_same = [SequenceMatcher(None, x, y).ratio() for x, y in zip(a, b, strict=True)]
        ratio_other = [max(SequenceMatcher(None, x, y).ratio() for j, y in enumerate(a) if j != i)
                       for i, x in enumerate(a)]
        out.append({
            "noise": noise.name,
            "cos_same": float(np.median((ea * eb).sum(1))),
            "cos_other": float(np.median(sims.max(1))),
            "ratio_same": float(np.median(ratio_same)),
            "ratio_other": float(np.median(ratio_other)),
        })
    return out


def _fmt(x: float) -> str:
    return "–" if x != x else f"{x:.3f}"  # nan → dash


def write_report(rows: list[dict], sep: list[dict], speed: dict, clean: StepBatch, args: argparse.Namespace,
                 noises: tuple[Noise, ...], matchers: tuple[str, ...]) -> str:
    lines = [
        "# State matching under observation noise",
        "",
        f"{'ALFWorld' if args.env == 'alfworld' else 'Sokoban'} rollouts: {clean.num_groups} groups × {args.group_size} members "
        f"(ε-optimal oracle, ε from 0.2 to 0.9), {len(clean)} steps, "
        f"{len(set(clean.state) | set(clean.next_state))} distinct clean boards. Seed {args.seed}"
        f"{', quick run' if args.quick else ''}.",
        "",
        "ARI: adjusted Rand index of the matched observations against the clean boards' exact clusters "
        "(1 = the clean partition). corr: Pearson correlation of the estimator's advantages on the noisy "
        "batch with that matcher against the same estimator on the clean batch with exact matching; "
        "step corr: the same for the step part of the advantage (advantage − GRPO episode advantage), the "
        "only part that state matching changes (0 when it vanishes: the estimator degraded to GRPO). "
        "match s: time to match one batch (embedding: encoding of the distinct texts + FAISS + "
        "clustering).",
        "",
        "## ARI by noise setting",
        "",
        "| noise | " + " | ".join(matchers) + " |",
        "|---|" + "---:|" * len(matchers),
    ]
    table = {(r["noise"], r["matcher"]): r for r in rows}
    for noise in noises:
        lines.append(f"| {noise.name} | " + " | ".join(_fmt(table[noise.name, m]["ari"]) for m in matchers)
                     + " |")
    lines += ["", "## Best matcher per noise setting", "",
              "| noise | best ARI | best mean step corr (GiGPO, SALT, GraphGPO) |", "|---|---|---|"]
    for noise in noises:
        cand = [table[noise.name, m] for m in matchers]
        best_ari = max(cand, key=lambda r: r["ari"])

        def mean_step(r: dict) -> float:
            vals = [r[f"step_corr_{e}"] for e in ESTIMATORS if r[f"step_corr_{e}"] == r[f"step_corr_{e}"]]
            return float(np.mean(vals)) if vals else float("-inf")

        best_corr = max(cand, key=mean_step)
        lines.append(f"| {noise.name} | {best_ari['matcher']} ({best_ari['ari']:.3f}) | "
                     f"{best_corr['matcher']} ({mean_step(best_corr):.3f}) |")
    lines += [
        "",
        "## Can a threshold separate noise from state changes?",
        "",
        "Median over boards of the similarity between two noisy copies of the same board (same) and "
        "between a board and its most similar *different* board of the batch (nearest other). A threshold "
        "recovers the clean boards only where same > nearest other.",
        "",
        "| noise | cosine same | cosine nearest other | difflib same | difflib nearest other |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in sep:
        lines.append(f"| {r['noise']} | {r['cos_same']:.4f} | {r['cos_other']:.4f} | "
                     f"{r['ratio_same']:.3f} | {r['ratio_other']:.3f} |")
    lines += ["", "## All measures", "",
              "| noise | matcher | ARI | clusters (clean) | corr GiGPO | corr SALT | corr GraphGPO | "
              "step corr GiGPO | step corr SALT | step corr GraphGPO | match s |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(
            f"| {r['noise']} | {r['matcher']} | {_fmt(r['ari'])} | {r['clusters']} ({r['clean_clusters']}) | "
            f"{_fmt(r['corr_gigpo'])} | {_fmt(r['corr_salt'])} | {_fmt(r['corr_graphgpo'])} | "
            f"{_fmt(r['step_corr_gigpo'])} | {_fmt(r['step_corr_salt'])} | {_fmt(r['step_corr_graphgpo'])} | "
            f"{r['match_s']:.3f} |")
    lines += [
        "",
        "## Speed",
        "",
        f"Matching one batch of 128 trajectories × 50 steps (6,400 rows; `match` clusters states and next "
        f"states) with 1,000 distinct states, {speed['cpu_count']} CPU cores, torch threads "
        f"{speed.get('torch_threads', '?')}, model already loaded, fresh matcher (no cached embedding), "
        f"median of {args.repeats}. Target: ≤ 3 s including encoding. Backends: the same all-MiniLM-L6-v2 run "
        "by PyTorch or compiled by OpenVINO (`agentgym_credit.embedding.openvino`), in float32 or bfloat16. "
        "GFLOP/s: the transformer's weight-matrix arithmetic of the batch (2 × non-embedding parameters × "
        "tokens, a lower bound) over the encode time — the cores' peak bounds it, so it tells how far a "
        "faster engine could still go.",
        "",
        "| states | mean chars | mean tokens | matmul GFLOP | load avg | matcher | total s | encode s | "
        "GFLOP/s | FAISS s | cluster s |",
        "|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    nan = float("nan")
    for kind, res in speed["kinds"].items():
        for label, total in res["median_s"].items():
            part = res["parts_median_s"].get(label, {})
            encode_s = part.get("encode_s", nan)
            rate = res["matmul_gflop"] / encode_s if encode_s == encode_s and encode_s > 0 else nan
            lines.append(
                f"| {kind} | {res['mean_chars']:.0f} | {res['mean_tokens']:.0f} | {res['matmul_gflop']:.0f} | "
                f"{res['load_avg']:.1f} | {label} | {total:.3f} | {_fmt(encode_s)} | "
                f"{'–' if rate != rate else f'{rate:.0f}'} | {_fmt(part.get('faiss_s', nan))} "
                f"| {_fmt(part.get('cluster_s', nan))} |")
    lines += [f"\n{label}: {why}." for label, why in speed.get("not_timed", {}).items()]
    lines += ["", "FAISS alone (IndexFlatIP + range search over 16 groups of ~62 precomputed embeddings): "
              + ", ".join(f"{kind} {1000 * res['faiss_only_s']:.2f} ms" for kind, res in speed["kinds"].items())
              + ".", ""]
    return "\n".join(lines)


def plot(rows: list[dict], noises: tuple[Noise, ...], matchers: tuple[str, ...], path: Path,
         env_name: str = "Sokoban") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    table = {(r["noise"], r["matcher"]): r for r in rows}
    # 2 × 2 panels at a page's width: four side by side made every label too small to read in the report
    fig, grid = plt.subplots(2, 2, figsize=(12, 9.5), sharex=True)
    axes = grid.ravel()
    x = np.arange(len(noises))
    panels = (("ari", "ARI vs clean boards"), ("step_corr_gigpo", "GiGPO step-part corr."),
              ("step_corr_salt", "SALT step-part corr."), ("step_corr_graphgpo", "GraphGPO step-part corr."))
    for ax, (key, title) in zip(axes, panels, strict=True):
        for m in matchers:
            ax.plot(x, [table[n.name, m][key] for n in noises], marker="o", label=m)
        ax.set_xticks(x, [n.name.split(" (")[0] for n in noises], rotation=35, ha="right", fontsize=10)
        ax.tick_params(axis="x", labelbottom=True)
        ax.set_title(title, fontsize=12)
        ax.set_ylim(-0.25 if key != "ari" else -0.05, 1.05)
        ax.grid(alpha=0.3)
    fig.suptitle(f"State matching under observation noise ({env_name})", fontsize=13)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(len(matchers), 4), fontsize=10, frameon=False)
    fig.tight_layout(rect=(0, 0.03 + 0.03 * ((len(matchers) + 3) // 4), 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    ap.add_argument("--quick", action="store_true",
                    help="small run: 4 groups, 3 noise settings, 4 matchers; PyTorch bf16 timed only where the CPU "
                         "has it natively")
    ap.add_argument("--groups", type=int, default=None, help="task groups (default 16, quick 4)")
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=None, help="speed repeats (default 3, quick 1)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--env", choices=["sokoban", "alfworld"], default="sokoban",
                    help="where the recorded states come from (the speed section always uses Sokoban boards)")
    ap.add_argument("--max-steps", type=int, default=20, help="episode length for ALFWorld")
    args = ap.parse_args(argv)
    if args.env == "alfworld":
        args.group_size = min(args.group_size, 4)
        args.groups = args.groups or 4
        ESTIMATORS["graphgpo"] = {"omega": "alfworld"}
    args.groups = args.groups or (4 if args.quick else 16)
    args.repeats = args.repeats or (1 if args.quick else 3)
    noises = QUICK_NOISES if args.quick else NOISES
    matchers = QUICK_MATCHERS if args.quick else MATCHERS

    model = load_sentence_model()
    env_id = "ALFWorld-Group-v0" if args.env == "alfworld" else "Sokoban-Group-v0"
    env_kwargs = {"max_steps": args.max_steps} if args.env == "alfworld" else {}
    clean = collect_states(env_id, args.groups, args.group_size, args.seed, **env_kwargs)
    print(f"clean batch: {len(clean)} rows, {clean.num_trajectories} trajectories, {clean.num_groups} groups, "
          f"success rate {clean.success[clean.done].mean():.2f}")
    rows = run_noise_study(clean, noises, matchers, args.seed, model)
    sep = separability(clean, noises, model, args.seed)
    speed_source = collect_states("Sokoban-Group-v0", 96, 8, args.seed + 7, max_steps=50)
    boards = sorted(set(speed_source.state) | set(speed_source.next_state))
    speed = run_speed(boards, args.repeats, args.seed, emulated_bf16=not args.quick)
    report = write_report(rows, sep, speed, clean, args, noises, matchers)
    print(report)
    stem = "matching" if args.env == "sokoban" else f"matching_{args.env}"
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{stem}.md").write_text(report)
    (RESULTS / f"{stem}.json").write_text(json.dumps({"rows": rows, "separability": sep, "speed": speed},
                                                     indent=2))
    plot(rows, noises, matchers, RESULTS / f"{stem}.png", "ALFWorld" if args.env == "alfworld" else "Sokoban")
    print(f"written to {RESULTS / (stem + '.md')} and {RESULTS / (stem + '.png')}")
    return {"rows": rows, "separability": sep, "speed": speed}


if __name__ == "__main__":
    main()
