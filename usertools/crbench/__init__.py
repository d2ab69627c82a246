# SPDX-License-Identifier: BSD-3-Clause
"""cr-bench: coreact apps against their peers (see usertools/cr-bench and core.py)."""
