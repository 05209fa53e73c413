"""`sweeper dashboard RESULTS [SWEEP]`: a live local web view of a running or finished sweep.

`server` (Python's http.server and a JSON API), `data` (what is shown: phase diagrams from the
sweep's cell summary, a cell's seeds, failed trials, a search's objective, progress), and
`static/` (the page; plotly.js comes from the installed plotly package, never a CDN).
"""

from .server import make_server, serve

__all__ = ["make_server", "serve"]
