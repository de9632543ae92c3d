"""The named checks (registered in ``mlc_lab.core.checks.CHECKS``)."""
