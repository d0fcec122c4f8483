"""Colour-vision-deficiency simulation and colour differences, for the browser tests.

- :func:`simulate`: how a dichromat sees an sRGB image, with the matrices of Machado,
  Oliveira & Fernandes (2009), "A physiologically-based model for simulation of color vision
  deficiency", IEEE TVCG 15(6), severity 1.0 (protanopia, deuteranopia). The matrices act
  on *linear* RGB: decode sRGB, multiply, clip to [0, 1], encode again.
- :func:`delta_e`: the CIE76 colour difference ΔE*ab, the Euclidean distance in CIELAB
  (D65 white). About 2.3 is a just-noticeable difference.
- :func:`contrast_ratio`: WCAG 2.1's contrast ratio of two colours, (L1 + 0.05)/(L2 + 0.05)
  of their relative luminances.
"""

from __future__ import annotations

import numpy as np

#: Machado et al. (2009), Table 1, severity 1.0; rows map linear (R, G, B) to the simulated.
MACHADO_2009 = {
    "protanopia": np.array(
        [
            [0.152286, 1.052583, -0.204868],
            [0.114503, 0.786281, 0.099216],
            [-0.003882, -0.048116, 1.051998],
        ]
    ),
    "deuteranopia": np.array(
        [
            [0.367322, 0.860646, -0.227968],
            [0.280085, 0.672501, 0.047413],
            [-0.011820, 0.042940, 0.968881],
        ]
    ),
}

# sRGB (D65) linear RGB -> CIE XYZ
_RGB_TO_XYZ = np.array(
    [
        [0.4124564, 0.3575761, 0.1804375],
        [0.2126729, 0.7151522, 0.0721750],
        [0.0193339, 0.1191920, 0.9503041],
    ]
)
_D65 = np.array([0.95047, 1.0, 1.08883])


def hex_rgb(color: str) -> np.ndarray:
    """'#RRGGBB' -> array([R, G, B]) in 0..255."""
    return np.array([int(color[i : i + 2], 16) for i in (1, 3, 5)], dtype=float)


def to_linear(rgb) -> np.ndarray:
    """sRGB values 0..255 -> linear light 0..1 (the sRGB transfer function inverted)."""
    c = np.asarray(rgb, dtype=float) / 255.0
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


def from_linear(lin) -> np.ndarray:
    """Linear light (clipped to 0..1) -> sRGB values 0..255."""
    c = np.clip(lin, 0.0, 1.0)
    return 255.0 * np.where(c <= 0.0031308, 12.92 * c, 1.055 * c ** (1 / 2.4) - 0.055)


def simulate(rgb, kind: str) -> np.ndarray:
    """``rgb`` (..., 3) in 0..255 as seen with ``kind`` ('protanopia' or 'deuteranopia')."""
    return from_linear(to_linear(rgb) @ MACHADO_2009[kind].T)


def to_lab(rgb) -> np.ndarray:
    """sRGB 0..255 (..., 3) -> CIELAB (L*, a*, b*), D65 white."""
    xyz = to_linear(rgb) @ _RGB_TO_XYZ.T / _D65
    eps, kappa = 216 / 24389, 24389 / 27
    f = np.where(xyz > eps, np.cbrt(xyz), (kappa * xyz + 16) / 116)
    return np.stack(
        [116 * f[..., 1] - 16, 500 * (f[..., 0] - f[..., 1]), 200 * (f[..., 1] - f[..., 2])],
        axis=-1,
    )


def delta_e(rgb1, rgb2) -> float:
    """CIE76 ΔE*ab between two sRGB colours (0..255)."""
    return float(np.linalg.norm(to_lab(rgb1) - to_lab(rgb2)))


def relative_luminance(rgb) -> float:
    """WCAG 2.1 relative luminance of an sRGB colour (0..255)."""
    return float(to_linear(rgb) @ np.array([0.2126, 0.7152, 0.0722]))


def contrast_ratio(rgb1, rgb2) -> float:
    """WCAG 2.1 contrast ratio, 1 (same) .. 21 (black on white)."""
    a, b = sorted([relative_luminance(rgb1), relative_luminance(rgb2)], reverse=True)
    return (a + 0.05) / (b + 0.05)
