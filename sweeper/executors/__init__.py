"""Where a sweep runs: in this process (`local`) or on Ray Tune (`ray_tune`, which alone
imports Ray). Both train packs through `sweeper.workers.execute_pack` and report to a
`Recorder`, the driver-side single writer of the store."""
