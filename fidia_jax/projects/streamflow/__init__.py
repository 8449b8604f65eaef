"""fidia_jax.projects.streamflow: stream-batched serving of a rectified-flow model (StreamFlow).

The driver trains a small rectified-flow U-Net on scikit-learn's bundled digits (resized to
16x16), optionally straightens it with one reflow round, and samples it through the stream
batcher: every network call advances requests that are at *different* timesteps, finished
images leave and queued requests take their slots, on batch sizes compiled ahead of time. It
reports the AlexNet Fréchet distance (a proxy, not FID) of samples at 4/8/16 Euler steps and
checks that the stream batch reproduces the sequential sampler. ``benchmarks/streamflow.py``
measures the serving side (sequential vs naive batching vs stream batch, Poisson arrivals).

Paper:
  StreamFlow (ICML 2026), code: https://github.com/World-Snapshot/StreamFlow (reports up to
  611 % speed-up of serving on GPU). We had the issue's summary, not the paper's text: the
  stream-batch idea is the paper's; the bucket/AOT/donation design, the slot refill policy and
  the small U-Net are **our reconstruction**. The rectified-flow objective and reflow are from
  Liu, Gong, Liu, "Flow Straight and Fast", ICLR 2023.

The method's own modules: ``model.py`` (:class:`StreamFlowUNet`, the velocity network),
``serving.py`` (:class:`StreamBatcher` with the stream, naive and the authors' fixed-pipeline
policies and per-request conditioning / classifier-free guidance, :func:`sample_euler`,
:func:`linear_timesteps`, :func:`velocity_apply`, ``check_timesteps``, ``check_noise``,
``bucket_size``) and ``perflow.py`` (PeRFlow's per-window eps-to-velocity conversion as a model
parameterisation, as in the authors' scheduler: :func:`perflow_apply`, :class:`PerflowWindows`,
:func:`perflow_timesteps`); re-exported here for ``benchmarks/streamflow.py`` and the notebook. Shared primitives used:
:func:`fidia_jax.losses.rectified_flow_loss`, :func:`fidia_jax.data.load_digit_images`,
:func:`fidia_jax.metrics.alexnet_frechet_distance`, :func:`fidia_jax.models.init_without_compile`,
:mod:`fidia_jax.train` (the step, the fit loop, the report files).
"""

from fidia_jax.projects.streamflow.configs import PRESETS as PRESETS
from fidia_jax.projects.streamflow.configs import StreamFlowConfig as StreamFlowConfig
from fidia_jax.projects.streamflow.configs import get_config as get_config
from fidia_jax.projects.streamflow.configs import load_config as load_config
from fidia_jax.projects.streamflow.model import StreamFlowUNet as StreamFlowUNet
from fidia_jax.projects.streamflow.perflow import PerflowWindows as PerflowWindows
from fidia_jax.projects.streamflow.perflow import perflow_apply as perflow_apply
from fidia_jax.projects.streamflow.perflow import perflow_timesteps as perflow_timesteps
from fidia_jax.projects.streamflow.serving import StreamBatcher as StreamBatcher
from fidia_jax.projects.streamflow.serving import linear_timesteps as linear_timesteps
from fidia_jax.projects.streamflow.serving import sample_euler as sample_euler
from fidia_jax.projects.streamflow.serving import velocity_apply as velocity_apply
from fidia_jax.projects.streamflow.train import SUMMARY_FILE as SUMMARY_FILE
from fidia_jax.projects.streamflow.train import digit_split as digit_split
from fidia_jax.projects.streamflow.train import fd_proxy as fd_proxy
from fidia_jax.projects.streamflow.train import init_flow as init_flow
from fidia_jax.projects.streamflow.train import save_sample_grid as save_sample_grid
from fidia_jax.projects.streamflow.train import stream_generate as stream_generate
from fidia_jax.projects.streamflow.train import streamflow_draw as streamflow_draw
from fidia_jax.projects.streamflow.train import train_and_evaluate as train_and_evaluate
from fidia_jax.projects.streamflow.train import train_flow as train_flow

__all__ = [
    "PRESETS",
    "PerflowWindows",
    "SUMMARY_FILE",
    "StreamBatcher",
    "StreamFlowConfig",
    "StreamFlowUNet",
    "digit_split",
    "fd_proxy",
    "get_config",
    "init_flow",
    "linear_timesteps",
    "load_config",
    "perflow_apply",
    "perflow_timesteps",
    "sample_euler",
    "save_sample_grid",
    "stream_generate",
    "streamflow_draw",
    "train_and_evaluate",
    "train_flow",
    "velocity_apply",
]
