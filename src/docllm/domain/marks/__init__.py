"""Findings a person judged (issue 46): a finding dismissed as a false alarm, accepted or won't be
fixed stays so on later reviews of its document, kept by the document's name and the finding's
fingerprint (``model.py``), in a store of its own (``ports.py``). ``service.py`` is the one way in
for the CLI and the dashboard; ``checked.py`` applies marks and a SARIF baseline to ``docllm
check``'s results; ``golden.py`` turns judgements into a golden set for ``docllm eval``."""
