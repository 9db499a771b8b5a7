"""Predictions off the event loop, within a time budget: the pipeline's ``Predictor`` and /preview's."""
