"""Lanes and tenants: the names and weights (``model``) and what operators see of them (``figures``)."""
