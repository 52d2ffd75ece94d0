"""The batch lane: the batch record (``model``), its request lines, results and their verdict, and the
services that run it (``batcher``, ``poller``, ``members``, ``bound``)."""
