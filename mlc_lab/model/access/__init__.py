"""The memory view's contract: the access program the analyses read (`program`) and the answers they give (`payload`)."""
