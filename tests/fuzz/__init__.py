"""The parser fuzz harness: shared strategies, a reference parser, the invariants, and the fuzz targets."""
