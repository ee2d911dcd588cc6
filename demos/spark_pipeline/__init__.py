"""The Spark pipeline demo: bus feeds → journal → Spark → back onto the bus.

100 subjects of data points, published by a source actor, are journaled by a
:class:`~actorbus.spark.Recorder`; a Spark Structured Streaming query computes
per-subject windowed averages with a watermark and its ``"actorbus"`` sink
publishes them back onto the bus, where a printer actor shows them.  A batch job
over the same journal prints per-subject statistics.  :func:`run` (in
``run.py``) runs it all; ``spark.properties`` holds the Spark master and the
journal path.
"""

from __future__ import annotations

from pathlib import Path

#: the demo's configuration: dispatchers, the Spark master, the journal path.
SPARK_PROPERTIES = Path(__file__).with_name("spark.properties")
