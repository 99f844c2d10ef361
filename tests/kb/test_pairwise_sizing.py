"""A matrix with one value per pair of points (a GP's kernel, a transport cost, distances), sized
from the point counts a conversation gives (issue 21): whole in each dtype asked, its Cholesky
factor, one block of rows, against the device; and the blocked code filled with those counts,
run here small on CPU against the dense computation."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from oomkb.kb.sizing import _plain_digits, load_sizing

SIZING = load_sizing()


def _pairs(text: str, language: str = "en", earlier: str = "", requested: int | None = None):
    return next((a for a in SIZING.answer(text, language, True, earlier=earlier, requested=requested)
                 if a.subject.startswith("pairwise")), None)


def test_two_labelled_point_sets_on_a_card_give_the_matrix_its_share_and_a_block():
    a = _pairs("ott-jax Sinkhorn: x has 60000 points, y 30000 points, float32, on an RTX 4090 24GB. Where does the "
               "memory go?")
    # 60000 × 30000 × 4 B = 6.71 GiB; JAX's pool on a 4090 is 75% of it
    assert "60,000 × 30,000 × 4 B (float32) = 6.71 GiB" in a.text
    assert "RTX 4090" in a.text and "% of" in a.text


def test_a_follow_up_that_grows_one_side_and_names_the_block_rows_is_sized_on_both():
    earlier = "Sinkhorn with ott-jax, x 32768点, y 16384点, float32, A100 40GB で OOM します。"
    a = _pairs("y も 32768点にしたいです。online=2048 にしたら 1チャンク何 GiB？全部だと？", "ja", earlier=earlier)
    # 32768² × 4 B = 4.00 GiB whole; 2048 × 32768 × 4 B = 256 MiB per block, 16 blocks
    assert "32,768 × 32,768 × 4 B（float32）= 4.00 GiB" in a.text
    assert "2,048 × 32,768 × 4 B = 256.00 MiB（16 ブロック）" in a.text


def test_a_gp_in_64_bit_gives_its_cholesky_factor_and_a_follow_up_both_dtypes_asked():
    earlier = "GP exato com 20k observações, jax_enable_x64 ligado, e uso Cholesky no solve. Quanto ocupa a matriz?"
    first = _pairs(earlier, "pt")
    assert "20.000 × 20.000 × 8 B (float64) = 2.98 GiB" in first.text and "5.96 GiB para as duas" in first.text
    second = _pairs("E com 80 mil pontos? Quanto em f64 e em f32?", "pt", earlier=earlier)
    # one count in a later turn replaces the square's side: 80000² × 8 B = 47.68 GiB, × 4 B = 23.84 GiB
    assert "80.000 × 80.000 × 8 B (float64) = 47.68 GiB; em float32, 23.84 GiB" in second.text


def test_a_count_that_ends_its_sentence_and_the_last_block_size_said_are_read():
    a = _pairs("ott: x hat ~120.000 Punkte, y ~200.000. batch_size=256 ging, dann batch_size auf 64 gesenkt, OOM "
               "auf der GPU.", "de")
    assert "120.000 × 200.000 × 4 B (float32) = 89.41 GiB" in a.text
    assert "In Blöcken von 64 Zeilen" in a.text  # the last one said
    # a decimal is no thousands group
    assert _plain_digits("lr 0.125 and") == "lr 0.125 and"


def test_a_matrix_larger_than_any_accelerator_says_so_and_a_failed_request_of_its_size_is_it():
    text = "exact GP with neural-tangents on 900,000 observations, the N x N kernel. bigger GPU?"
    requested = 900_000 * 900_000 * 4 + 4096  # (a library may pad it a little)
    a = _pairs(text, requested=requested)
    assert a.subject == "pairwise_log" and "allocation that failed is this matrix" in a.text
    assert "No single accelerator holds 2.95 TiB" in a.text and "at least 38 GPUs of 80 GiB" in a.text
    assert SIZING.pairs_requested(text, requested) and not SIZING.pairs_requested(text, requested // 3)


def test_no_pair_matrix_without_a_pairwise_computation_named():
    assert _pairs("I have 50000 points in my dataset and a 7B model on an A100, does it fit?") is None


def _run(snippet: str) -> dict:
    scope: dict = {}
    exec(compile(snippet, "<snippet>", "exec"), scope)  # noqa: S102 (our own catalogue's code)
    return scope


def test_the_blocked_kernel_solve_code_filled_small_solves_the_dense_system():
    a = _pairs("GP with 600 points: give me the code to solve Sigma^-1 y with CG without the whole matrix, "
               "blocks of 128 rows")
    assert a.snippet and "n, m, block = 600, 600, 128" in a.snippet and "cg(" in a.snippet
    scope = _run(a.snippet)
    x, y, alpha, noise = scope["x"], scope["y"], scope["alpha"], scope["noise"]
    d2 = jnp.sum(x * x, 1)[:, None] + jnp.sum(x * x, 1)[None, :] - 2.0 * x @ x.T
    k = jnp.exp(-0.5 * jnp.maximum(d2, 0.0)) + noise * jnp.eye(600)
    assert float(jnp.linalg.norm(k @ alpha - y) / jnp.linalg.norm(y)) < 1e-3


def test_the_blocked_sinkhorn_code_filled_small_equals_the_dense_iterations():
    a = _pairs("Sinkhorn (ott-jax), x 300 points and y 200 points, epsilon=0.5, batch_size=64: the code please")
    assert a.snippet and "n, m, block = 300, 200, 64" in a.snippet and "eps = 0.5" in a.snippet
    scope = _run(a.snippet.replace("iters=1000", "iters=50"))
    x, y, eps = scope["x"], scope["y"], scope["eps"]
    c = np.maximum((x * x).sum(1)[:, None] + (y * y).sum(1)[None, :] - 2.0 * np.asarray(x) @ np.asarray(y).T, 0.0)
    la, lb = -np.log(300), -np.log(200)
    f, g = np.zeros(300), np.zeros(200)
    for _ in range(50):
        f = -eps * jax.nn.logsumexp((g[None, :] - c) / eps + lb, axis=1)
        g = -eps * jax.nn.logsumexp((np.asarray(f)[:, None] - c) / eps + la, axis=0)
    dense = float(np.mean(f) + np.mean(g))
    assert abs(float(scope["reg_ot_cost"](x, y, 50)) - dense) < 1e-4


def test_an_ntk_over_images_is_square_in_the_images_and_a_limit_met_before_is_not_a_side():
    # "30000 картинках 3×512×512" are the points; "fit at most ~100 examples" in PyTorch is not the other side;
    # the images themselves are sized too (87.89 GiB in float32), and "картинках" counts no cards
    text = ("Нужно посчитать эмпирическое NTK (J·Jᵀ) для сети на stax с ~2.5M параметров, на ~30000 картинках "
            "3×512×512. GPU одна, 12 GB. Моя реализация на PyTorch влезала максимум на ~100 примеров. Сколько памяти "
            "под полное ядро и под данные?")
    lines = SIZING.answer(text, "ru", True)
    pairs = next(a for a in lines if a.subject == "pairwise")
    assert "30\xa0000 × 30\xa0000 × 4 Б (float32) = 3.35 GiB" in pairs.text
    data = next(a for a in lines if a.subject == "dataset")
    assert "87.89 GiB" in data.text
    assert SIZING.read(text).devices in (None, 1)


def test_a_follow_up_count_with_a_spanish_y_is_square_and_an_eigh_counts_four_matrices_against_one_card():
    # "¿Y si me quedo con 32767 muestras?": "y" is Spanish "and", not the side m; eigh on one RTX 2080:
    # 32767² × 4 B = 4.00 GiB, up to 16 GiB with eigenvectors and workspace, over the 6 GiB pool
    lines = SIZING.answer("¿Y si me quedo con 32767 muestras? ¿Entraría en una 2080?", "es", True,
                          earlier="nt.predict.gradient_descent_mse de neural-tangents: ntk_train_train es 60000×60000 y "
                                  "el eigh interno revienta. Tengo 4 RTX 2080 (8 GB cada una).")
    pairs = next(a for a in lines if a.subject == "pairwise")
    assert "32.767 × 32.767" in pairs.text and "4.00 GiB" in pairs.text and "16.00 GiB" in pairs.text, pairs.text
    assert "no cabe" in pairs.text and "filas ocupan" not in pairs.text
    assert not [a for a in lines if a.subject == "dataset"]
