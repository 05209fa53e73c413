"""sweeper: sweeps of small attention trainings, trajectories in Parquet, phase diagrams."""

__version__ = "0.1.0"
