"""The Hugging Face sampler: a fixed seed draws the tokens it drew before the sampler was sped up, and
:class:`StopMatcher` ends a response at the token that completes a stop string, whichever way it is split."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from agentgym_credit.baselines.generation import HFGenerator, StopMatcher
from agentgym_credit.baselines.policy import load_policy
from agentgym_credit.baselines.rollout import collect_rollout, make_group_env

PINNED = json.loads((Path(__file__).parent / "data" / "sampled_rollouts.json").read_text())["rollouts"]


@pytest.mark.parametrize("seed", sorted(PINNED, key=int))
def test_a_fixed_seed_samples_the_pinned_rollout(seed, cache_dir):
    expected = PINNED[seed]
    policy = load_policy("tiny", cache_dir=cache_dir, seed=0)
    env = make_group_env("Sokoban-Group-v0", 2, 2, max_steps=3)
    try:
        out = collect_rollout(env, HFGenerator(policy, max_new_tokens=48, temperature=1.0), seed=int(seed))
    finally:
        env.close()
    assert out.batch.traj.tolist() == expected["traj"] and out.batch.t.tolist() == expected["t"]
    assert out.response_ids == expected["response_ids"]
    assert any(len(r) < 48 for r in out.response_ids)  # a row stopped early and left the batch
    # the same distribution: log-probs to float32 rounding (a few 1e-6 per token)
    assert [float(np.sum(lp)) for lp in out.old_logprobs] == pytest.approx(expected["logprob_sums"], abs=1e-3)


def test_stop_strings_end_a_response_at_the_completing_token(cache_dir):
    policy = load_policy("tiny", cache_dir=cache_dir)
    tok = policy.tokenizer
    matcher = StopMatcher(tok, ("</action>",))
    single = tok.convert_tokens_to_ids("</action>")
    assert matcher.done([5, single])
    # tokens whose text holds the whole stop string (learnt merges such as "up</action>") end it on their own
    inside = [i for i in range(len(tok)) if "</action>" in tok.decode([i]) and i != single]
    assert inside and all(matcher.done([i]) for i in inside[:20])
    # a stop string split over several tokens ends the response at its last piece, not before
    pieces = [tok.convert_tokens_to_ids(t) for t in tok.tokenize("</act")] + \
        [tok.convert_tokens_to_ids(t) for t in tok.tokenize("ion>")]
    text = tok.decode(pieces)
    assert text == "</action>" or "</action>" in text
    assert matcher.done(pieces) and not any(matcher.done(pieces[:k]) for k in range(1, len(pieces)))
    assert not matcher.done(tok("<action>up", add_special_tokens=False)["input_ids"])
    assert not StopMatcher(tok, ()).done([single])
