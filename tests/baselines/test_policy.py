"""Policy loading, the tiny tokenizer cache and the log-probabilities of step records."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from agentgym_credit.baselines.generation import HFGenerator
from agentgym_credit.baselines.policy import (
    MIN_SHARED_PREFIX,
    build_tiny_tokenizer,
    encode_prompts,
    load_policy,
    native_bf16,
    prefix_clusters,
    prefix_plan,
    resolve_precision,
    response_logprobs,
    shared_prefix_length,
)
from agentgym_credit.baselines.rollout import collect_rollout, make_group_env, template_for


def test_tiny_tokenizer_is_deterministic_and_cached(cache_dir, tmp_path):
    a = build_tiny_tokenizer(cache_dir)
    files = list(cache_dir.glob("tiny-tokenizer-*/tokenizer.json"))
    assert len(files) == 1
    b = build_tiny_tokenizer(tmp_path)  # trained again from scratch elsewhere
    assert a.get_vocab() == b.get_vocab()
    text = "<think>the box is left</think><action>left</action>"
    assert a.decode(a(text)["input_ids"]) == text
    assert a.pad_token_id != a.eos_token_id


def test_tiny_model_is_small_and_seeded(cache_dir):
    p1 = load_policy("tiny", cache_dir=cache_dir, seed=3)
    p2 = load_policy("tiny", cache_dir=cache_dir, seed=3)
    n = sum(x.numel() for x in p1.model.parameters())
    assert 3e6 < n < 8e6
    assert p1.model.config.hidden_size == 256 and p1.model.config.num_hidden_layers == 6
    for x, y in zip(p1.model.parameters(), p2.model.parameters(), strict=True):
        assert torch.equal(x, y)
    assert not p1.chat  # no chat template: prompts are used as they are


@pytest.mark.parametrize("precision, atol", [("float32", 2e-4), ("bfloat16", 5e-2)])
def test_generation_logprobs_match_a_training_forward(precision, atol, cache_dir):
    policy = load_policy("tiny", cache_dir=cache_dir, seed=0, precision=precision)
    gen = HFGenerator(policy, max_new_tokens=6, temperature=0.8)
    # the first prompt twice: it is prefilled once and its cache copied (the rows still sample independently)
    prompts = ["You are the player (P) in a Sokoban puzzle.", "Current grid:\n# # #\n# P #",
               "You are the player (P) in a Sokoban puzzle."]
    out = gen.generate(prompts, seed=1)
    assert [g.prompt_ids for g in out] == encode_prompts(policy, prompts)
    # one decoding step per token after the first (the prefill's), until the longest row stopped
    assert gen.stats["decode_steps"] == max(len(g.response_ids) for g in out) - 1
    assert 0 < gen.stats["prefill_s"] < gen.stats["generate_s"]
    with policy.autocast():
        fwd = response_logprobs(policy.model, [g.prompt_ids for g in out], [g.response_ids for g in out],
                                pad_id=policy.pad_id, temperature=0.8)
    assert fwd.logprobs.dtype == torch.float32  # log-probs in float32 whatever the compute precision
    for b, g in enumerate(out):
        assert 1 <= len(g.response_ids) <= 6
        recomputed = fwd.logprobs[b, fwd.mask.shape[1] - len(g.response_ids):].detach().numpy()
        np.testing.assert_allclose(recomputed, g.logprobs, atol=atol)


def test_precision_is_resolved_and_checked(cache_dir):
    assert resolve_precision("float32") == "float32" and resolve_precision("bfloat16") == "bfloat16"
    assert resolve_precision("auto") == ("bfloat16" if native_bf16("cpu") else "float32")
    with pytest.raises(ValueError, match="precision must be one of"):
        resolve_precision("fp16")
    policy = load_policy("tiny", cache_dir=cache_dir, precision="bfloat16")
    assert next(policy.model.parameters()).dtype == torch.float32  # weights stay float32 (master copy)
    ids = torch.tensor([[5, 6, 7]])
    with policy.autocast():
        assert policy.model(input_ids=ids).logits.dtype == torch.bfloat16
    with load_policy("tiny", cache_dir=cache_dir).autocast():
        assert policy.model(input_ids=ids).logits.dtype == torch.float32


def test_rollout_keeps_token_records_for_every_step(cache_dir):
    policy = load_policy("tiny", cache_dir=cache_dir, seed=0)
    env = make_group_env("Sokoban-Group-v0", 2, 2, max_steps=3)
    rollout = collect_rollout(env, HFGenerator(policy, max_new_tokens=4), seed=5)
    batch = rollout.batch
    assert batch.num_trajectories == 4 and batch.num_groups == 2
    assert len(rollout.prompt_ids) == len(rollout.response_ids) == len(rollout.old_logprobs) == len(batch)
    assert all(len(r) == len(lp) for r, lp in zip(rollout.response_ids, rollout.old_logprobs, strict=True))
    # members of one group start from the same board
    for part in batch.split_by_group().values():
        assert len({part.state[i] for i in np.flatnonzero(part.t == 0)}) == 1
    assert 0.0 <= rollout.stats["success_rate"] <= 1.0 and rollout.stats["rollout_s"] > 0
    assert template_for("Sokoban-Group-v0") == "sokoban"
    with pytest.raises(ValueError):
        template_for("Atari-v0")


def test_stop_matcher_and_decoded_tags(cache_dir):
    from agentgym_credit.baselines.generation import StopMatcher

    policy = load_policy("tiny", cache_dir=cache_dir, seed=0)
    tok = policy.tokenizer
    matcher = StopMatcher(tok, ("</action>",))
    ids = tok("<think>go</think><action>up</action>", add_special_tokens=False)["input_ids"]
    assert matcher.done(ids) and not any(matcher.done(ids[:k]) for k in range(1, len(ids)))
    spanning = StopMatcher(tok, ("go</think>",))  # a stop string over several tokens
    assert [k for k in range(1, len(ids) + 1) if spanning.done(ids[:k])][0] == 3
    # the sampler decodes with the tags kept (they are special tokens of the tiny tokenizer)
    gen = HFGenerator(policy, max_new_tokens=3, temperature=1.0)
    out = gen.generate(["<think>"], seed=0)
    assert out[0].text == tok.decode(out[0].response_ids[:-1] if out[0].response_ids[-1] == policy.eos_id
                                      else out[0].response_ids, skip_special_tokens=False)


def _sokoban_prompts(steps: int = 3) -> list[str]:
    """Real Sokoban prompts over a few steps (2 groups × 2): they share the task description."""
    env = make_group_env("Sokoban-Group-v0", 2, 2, max_steps=steps + 1)
    obs, _ = env.reset(seed=11)
    out: list[str] = []
    for t in range(steps):
        out += list(obs)
        moves = ["up", "down", "left", "right"]
        obs, *_ = env.step([f"<think>.</think><action>{moves[(t + k) % 4]}</action>" for k in range(len(obs))])
    return out


def _count_input_tokens(model) -> tuple[list[int], object]:
    seen: list[int] = []
    handle = model.get_input_embeddings().register_forward_hook(lambda m, args, out: seen.append(args[0].numel()))
    return seen, handle


def _forward_both_ways(policy, prompts, responses):
    """``response_logprobs`` (with hidden states) and its gradients, unshared then shared: per way the forward,
    the flattened gradient of log-probs plus hidden states, and the token counts the model embedded per call."""
    results = []
    for share in (False, True):
        policy.model.zero_grad(set_to_none=True)
        seen, handle = _count_input_tokens(policy.model)
        fwd = response_logprobs(policy.model, prompts, responses, pad_id=policy.pad_id, hidden=True,
                                share_prefix=share)
        handle.remove()
        (fwd.logprobs.sum() + fwd.boundary_hidden.square().mean()).backward()
        grads = torch.cat([p.grad.flatten() for p in policy.model.parameters() if p.grad is not None])
        results.append((fwd, grads, seen))
    return results


def _assert_same_forward(fwd, grads, reference, reference_grads):
    """Log-probs and hidden states within 2e-5 (float32 rounding), gradients within 1e-4 relative."""
    torch.testing.assert_close(fwd.logprobs, reference.logprobs, atol=2e-5, rtol=0)
    torch.testing.assert_close(fwd.boundary_hidden, reference.boundary_hidden, atol=2e-5, rtol=1e-5)
    torch.testing.assert_close(fwd.last_hidden, reference.last_hidden, atol=2e-5, rtol=1e-5)
    torch.testing.assert_close(grads, reference_grads, atol=1e-5, rtol=1e-4)


def test_shared_prefix_length():
    assert shared_prefix_length([[1, 2, 3]]) == 0  # one row: nothing to share
    assert shared_prefix_length([[1, 2, 3, 4], [1, 2, 5], [1, 2, 3]]) == 2
    assert shared_prefix_length([[1, 2, 3], [1, 2, 3]], limit=2) == 2
    assert shared_prefix_length([[7, 2], [1, 2]]) == 0


def test_shared_prefix_forward_matches_the_unshared_one(cache_dir):
    """The prompts' common prefix runs once; log-probs, hidden states and gradients are those of full rows."""
    policy = load_policy("tiny", cache_dir=cache_dir, seed=0)
    prompts = encode_prompts(policy, _sokoban_prompts())
    shared = shared_prefix_length(prompts)
    assert shared >= MIN_SHARED_PREFIX and len({tuple(p) for p in prompts}) > 4
    rng = np.random.default_rng(0)
    responses = [list(rng.integers(5, 200, rng.integers(1, 9))) for _ in prompts]
    (plain, g_plain, seen_plain), (shared_fwd, g_shared, seen_shared) = _forward_both_ways(policy, prompts, responses)
    n_plain, n_shared = sum(seen_plain), sum(seen_shared)
    assert torch.equal(plain.mask, shared_fwd.mask)
    _assert_same_forward(shared_fwd, g_shared, plain, g_plain)
    width = max(len(p) + len(r) for p, r in zip(prompts, responses, strict=True))
    assert n_plain == len(prompts) * width
    assert n_shared == shared + len(prompts) * (width - shared)  # the prefix ran once, not once per row


def test_sampler_prefills_the_shared_prefix_once(cache_dir):
    """The sampler's prefill shares the prompts' common prefix; the sampled log-probs are the full rows'."""
    policy = load_policy("tiny", cache_dir=cache_dir, seed=0)
    texts = _sokoban_prompts(steps=2)
    prompts = encode_prompts(policy, texts)
    seen, handle = _count_input_tokens(policy.model)
    out = HFGenerator(policy, max_new_tokens=5, temperature=0.7).generate(texts, seed=3)
    handle.remove()
    distinct = list(dict.fromkeys(tuple(p) for p in prompts))
    shared = shared_prefix_length(distinct)
    assert shared >= MIN_SHARED_PREFIX
    assert seen[0] == shared and seen[1] == len(distinct) * (max(map(len, distinct)) - shared)
    fwd = response_logprobs(policy.model, [g.prompt_ids for g in out], [g.response_ids for g in out],
                            pad_id=policy.pad_id, temperature=0.7, share_prefix=False)
    for b, g in enumerate(out):
        recomputed = fwd.logprobs[b, fwd.mask.shape[1] - len(g.response_ids):].detach().numpy()
        np.testing.assert_allclose(recomputed, g.logprobs, atol=2e-4)


def _search_prompts(steps: int = 1) -> list[str]:
    """Real SearchQA prompts (2 groups × 2): the question comes early, so a group shares far more than the batch."""
    env = make_group_env("SearchQA-Group-v0", 2, 2, max_steps=steps + 1)
    obs, _ = env.reset(seed=5)
    out: list[str] = list(obs)
    for _ in range(steps - 1):
        obs, *_ = env.step(["<think>.</think><search>founded</search>"] * len(obs))
        out += list(obs)
    return out


def test_prefix_clusters_split_where_it_saves_tokens():
    rows = [[1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 7], [1, 2, 8, 8, 8, 8], [1, 2, 8, 8, 8, 9], [1, 2, 3, 4, 9, 9]]
    cluster, lengths = prefix_clusters(rows, [5] * 5)
    # two branches below the common [1, 2]: [3, 4, ...] (rows 0, 1, 4) and [8, 8, 8, ...] (rows 2, 3)
    assert [lengths[c] for c in cluster] == [4, 4, 5, 5, 4] and cluster[0] == cluster[1] == cluster[4]
    assert prefix_clusters([[1, 2, 3], [1, 2, 4], [1, 5, 6]], [2, 2, 2]) == ([0, 0, 0], [1])  # no saving in a split
    assert prefix_clusters([[1, 2, 3, 4]], [3]) == ([0], [0])  # one row: nothing to share
    assert prefix_clusters([[1, 2, 3], [1, 2, 3]], [1, 2]) == ([0, 0], [1])  # a row shares at most its limit
    with pytest.raises(ValueError):
        prefix_plan([[1, 2], [1, 3]], [2, 1])  # a row must keep a token after its prefix
    # the plan counts padded positions: clusters win only where every row's rest gets shorter
    long_a, long_b = [0] * 20 + [1] * 30, [0] * 20 + [2] * 30
    rows = [long_a + [5], long_a + [6], long_b + [7], long_b + [8]]
    assert prefix_plan(rows, [50] * 4) == ([0, 0, 1, 1], [50, 50])
    assert prefix_plan(rows + [[0] * 20 + [3] * 40], [50] * 4 + [59]) == ([0] * 5, [20])  # a long lone row
    assert prefix_plan([[1, 2, 3], [4, 5, 6]], [2, 2]) == ([0, 0], [])


def test_clustered_prefix_forward_matches_the_unshared_one(cache_dir):
    """Each task group's prompt prefix runs once (one padded batch of prefixes); results are the full rows'."""
    policy = load_policy("tiny", cache_dir=cache_dir, seed=0)
    prompts = encode_prompts(policy, _search_prompts()) * 2  # each prompt twice: two members' responses
    rng = np.random.default_rng(1)
    responses = [list(rng.integers(5, 200, rng.integers(1, 9))) for _ in prompts]
    limits = [len(p) - 1 for p in prompts]
    cluster, lengths = prefix_plan([p + r for p, r in zip(prompts, responses, strict=True)], limits)
    assert len(lengths) == 2 and min(lengths) > shared_prefix_length(prompts) + MIN_SHARED_PREFIX
    (plain, g_plain, n_plain), (clustered, g_clustered, n_clustered) = _forward_both_ways(policy, prompts, responses)
    _assert_same_forward(clustered, g_clustered, plain, g_plain)
    rest = max(len(p) + len(r) - lengths[c] for p, r, c in zip(prompts, responses, cluster, strict=True))
    assert n_clustered == [2 * max(lengths), len(prompts) * rest]  # each group's prefix once, then the rests
    assert sum(n_clustered) < sum(n_plain)


def test_sampler_prefills_each_groups_prefix_once(cache_dir):
    """Generation from prompts of two task groups: their two prefixes run once each, the samples are exact."""
    policy = load_policy("tiny", cache_dir=cache_dir, seed=0)
    texts = _search_prompts(steps=2)
    prompts = encode_prompts(policy, texts)
    distinct = [list(x) for x in dict.fromkeys(tuple(p) for p in prompts)]
    cluster, lengths = prefix_plan(distinct, [len(p) - 1 for p in distinct])
    assert len(lengths) > 1
    seen, handle = _count_input_tokens(policy.model)
    out = HFGenerator(policy, max_new_tokens=5, temperature=0.7).generate(texts, seed=3)
    handle.remove()
    rest = max(len(p) - lengths[c] for p, c in zip(distinct, cluster, strict=True))
    assert seen[:2] == [len(lengths) * max(lengths), len(distinct) * rest]
    fwd = response_logprobs(policy.model, [g.prompt_ids for g in out], [g.response_ids for g in out],
                            pad_id=policy.pad_id, temperature=0.7, share_prefix=False)
    for b, g in enumerate(out):
        recomputed = fwd.logprobs[b, fwd.mask.shape[1] - len(g.response_ids):].detach().numpy()
        np.testing.assert_allclose(recomputed, g.logprobs, atol=2e-4)
