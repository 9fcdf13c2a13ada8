"""What the capture ran on: device, compute capability and library versions."""

import platform

import torch


def describe_environment(device):
    """A JSON-ready dict of the device and the versions that shape its kernels."""
    env = {
        "torch": torch.__version__,
        "cuda_runtime": torch.version.cuda,
        "cudnn": None,
        "python": platform.python_version(),
        "device": device,
        "device_name": platform.processor() or platform.machine(),
        "compute_capability": None,
    }
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        env["device_name"] = props.name
        env["compute_capability"] = f"{props.major}.{props.minor}"
        env["sm_count"] = props.multi_processor_count
        env["cudnn"] = _cudnn_version()
        env["driver"] = _driver_version()
    return env


def _cudnn_version():
    version = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    if version is None:
        return None
    # cuDNN 9 encodes 9.10.2 as 91002; older releases as major*1000 + minor*100 + patch.
    major, rest = divmod(version, 10000) if version >= 90000 else divmod(version, 1000)
    minor, patch = divmod(rest, 100)
    return f"{major}.{minor}.{patch}"


def _driver_version():
    try:
        import subprocess

        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=10,
        )
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 else None
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return None
