"""The memory view's widget (`view`), its rendering of footprints into plain data (`render`) and its pool of background analyses (`pool`)."""
