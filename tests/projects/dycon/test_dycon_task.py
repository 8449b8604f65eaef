"""The DyCon task generator: solutions are right, labels agree with the tokens, closed-form targets."""

import numpy as np
import pytest

from fidia_jax.projects.dycon import task

V = task.DyconVocab(base=5, max_operands=6, max_redundant=3)
R = task.DYCON_ROLES


@pytest.fixture(scope="module")
def batch():
    return task.make_dycon_task(300, vocab=V, error_rate=0.3, redundant_rate=0.6, seed=3)


def _units(tokens, start, stop):
    """Splits tokens[start:stop] at SEP into (first position, tokens) units."""
    units, cur, first = [], [], start
    for p in range(start, stop):
        if tokens[p] == V.SEP:
            units.append((first, cur))
            cur, first = [], p + 1
        else:
            cur.append(int(tokens[p]))
    assert not cur
    return units


def test_solutions_are_correct_and_labels_consistent(batch):
    n_err = n_red = 0
    for n in range(len(batch.length)):
        k, tok, role = int(batch.num_operands[n]), batch.tokens[n], batch.roles[n]
        ops = batch.operands[n, :k]
        assert np.all(batch.operands[n, k:] == -1)
        assert batch.answer[n] == ops.sum() % V.base
        # prompt
        assert tok[0] == V.BOS and tok[k + 1] == V.EQ and batch.prompt_len[n] == k + 2
        assert [V.operand_parts(int(t)) for t in tok[1 : k + 1]] == [
            (i + 1, int(a)) for i, a in enumerate(ops)
        ]
        assert np.all(role[: k + 2] == R["prompt"])
        e = int(batch.think_end[n])
        assert tok[e] == V.END_THINK and role[e] == R["end"]
        assert list(tok[e + 1 : e + 3]) == [int(V.digit(batch.answer[n])), V.EOS]
        assert (
            batch.length[n] == e + 3
            and np.all(tok[e + 3 :] == V.PAD)
            and np.all(role[e + 3 :] == R["pad"])
        )
        # thinking: walk the units and recompute the running sum
        s, j, last_step = 0, 0, None
        for first, u in _units(tok, k + 2, e):
            kind = role[first]
            assert np.all(
                role[first : first + len(u) + 1] == kind
            )  # one role per unit, SEP included
            if kind in (R["step"], R["error"]):
                assert len(u) == 4 - 1 and u[0] == V.digit(s)
                j += 1
                assert V.operand_parts(u[1]) == (j, int(ops[j - 1]))
                right = (s + int(ops[j - 1])) % V.base
                assert (u[2] == V.digit(right)) == (kind == R["step"])
                last_step = (s, u[1], right)
                s = right
                n_err += kind == R["error"]
            else:
                assert kind in (R["corrective"], R["redundant"]) and u[0] == V.WAIT
                prev_s, op, right = last_step
                assert u[1:] == [int(V.digit(prev_s)), op, int(V.digit(right))]
                if kind == R["corrective"]:
                    assert role[first - 2] == R["error"]  # follows the wrong value it corrects
                else:
                    assert j == k  # redundant: only once the answer is known
                    n_red += 1
        assert j == k and s == batch.answer[n]
        # loss weights: everything after the prompt
        assert np.all(
            batch.loss_weights[n]
            == ((np.arange(len(tok)) >= k + 2) & (np.arange(len(tok)) < e + 3))
        )
        # the parser reads the generator's own solutions as right, with matching counts
        g = task.parse_dycon_generation(tok[k + 2 :], int(batch.answer[n]), V)
        assert g.correct and g.finished and g.uncorrected == 0 and g.malformed == 0
        assert g.errors == g.corrective == np.sum(role == R["error"]) // 4
        assert g.redundant == np.sum(role == R["redundant"]) // 5
        assert g.num_tokens == e + 3 - (k + 2) and g.think_tokens == e - (k + 2)
    assert n_err > 50 and n_red > 50  # the rates above really inject both kinds


def test_remaining_length_target_closed_form(batch):
    R_max = V.max_think()
    assert R_max == 9 * 6 + 5 * 3 + 1
    assert batch.tokens.shape[1] <= V.max_len()
    for n in range(40):
        tok, e = batch.tokens[n], int(batch.think_end[n])
        for t in range(tok.shape[0]):
            is_b = t < e and tok[t] in (V.EQ, V.SEP)
            assert batch.boundary[n, t] == is_b
            if is_b:
                remaining = sum(
                    1 for _ in range(t + 1, e + 1)
                )  # brute force count through </think>
                want = np.log(1.0 + remaining) / np.log(1.0 + R_max)
                assert batch.target[n, t] == pytest.approx(want, rel=1e-6)
            else:
                assert batch.target[n, t] == 0.0
    # the first boundary (=) reads the whole thinking length
    n0 = 0
    assert batch.boundary[n0, batch.prompt_len[n0] - 1]
    np.testing.assert_allclose(
        task.remaining_length_target([0, R_max], R_max), [0.0, 1.0], atol=1e-7
    )


def test_clean_solutions_have_closed_form_length():
    b = task.make_dycon_task(50, vocab=V, error_rate=0.0, redundant_rate=0.0, seed=0)
    k = b.num_operands
    np.testing.assert_array_equal(
        b.length, 5 * k + 5
    )  # prompt k+2, 4 per step, </think>, answer, EOS
    np.testing.assert_array_equal(b.roles == R["error"], False)
    b2 = task.make_dycon_task(50, vocab=V, error_rate=0.0, redundant_rate=1.0, seed=0)
    np.testing.assert_array_equal(b2.length, 5 * k + 5 + 5 * V.max_redundant)
    # same seed, same batch
    np.testing.assert_array_equal(
        task.make_dycon_task(50, vocab=V, seed=4).tokens,
        task.make_dycon_task(50, vocab=V, seed=4).tokens,
    )


def test_parser_on_constructed_generations():
    d, op = V.digit, V.operand
    # operands (3, 4): s1 = 3, s2 = 2. A wrong second step left uncorrected, then the wrong answer.
    gen = [d(0), op(1, 3), d(3), V.SEP, d(3), op(2, 4), d(1), V.SEP, V.END_THINK, d(1), V.EOS]
    g = task.parse_dycon_generation(np.asarray(gen), 2, V)
    assert not g.correct and g.errors == 1 and g.uncorrected == 1 and g.corrective == 0
    assert g.num_tokens == 11 and g.think_tokens == 8
    # corrected, then one redundant re-check, then the right answer; tokens after EOS ignored
    gen = [
        d(0),
        op(1, 3),
        d(3),
        V.SEP,
        d(3),
        op(2, 4),
        d(1),
        V.SEP,
        V.WAIT,
        d(3),
        op(2, 4),
        d(2),
        V.SEP,
        V.WAIT,
        d(3),
        op(2, 4),
        d(2),
        V.SEP,
        V.END_THINK,
        d(2),
        V.EOS,
        V.WAIT,
        V.WAIT,
    ]
    g = task.parse_dycon_generation(np.asarray(gen), 2, V)
    assert g.correct and (g.errors, g.corrective, g.redundant, g.uncorrected) == (1, 1, 1, 0)
    assert g.num_tokens == 21
    # never finished, one malformed unit
    g = task.parse_dycon_generation(np.asarray([d(0), d(0), V.SEP, V.WAIT]), 2, V)
    assert not g.finished and not g.correct and g.malformed == 2 and g.num_tokens == 4


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="num_examples"):
        task.make_dycon_task(0)
    with pytest.raises(ValueError, match="error_rate"):
        task.make_dycon_task(4, error_rate=1.0)
    with pytest.raises(ValueError, match="redundant_rate"):
        task.make_dycon_task(4, redundant_rate=-0.1)
    with pytest.raises(ValueError, match="min_operands"):
        task.make_dycon_task(4, min_operands=9)
    with pytest.raises(ValueError, match="base"):
        task.DyconVocab(base=1)
    with pytest.raises(ValueError, match="remaining"):
        task.remaining_length_target([-1], 10)
    with pytest.raises(ValueError, match="width"):
        task.make_dycon_task(4, vocab=V, num_operands=[6, 6, 6, 6]).prompts(3)


def test_longest_solution_reads_target_one_at_the_first_boundary():
    # every step wrong and corrected, every redundant reflection taken: thinking = max_think
    b = task.make_dycon_task(
        4, vocab=V, error_rate=0.999999, redundant_rate=1.0, seed=0, num_operands=[6, 6, 6, 6]
    )
    assert np.all(b.think_end - (b.prompt_len - 1) == V.max_think())
    assert b.tokens.shape[1] == V.max_len()
    np.testing.assert_allclose(b.target[np.arange(4), b.prompt_len - 1], 1.0, rtol=1e-6)
