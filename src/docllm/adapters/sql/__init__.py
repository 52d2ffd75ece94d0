"""Adapters over SQL (SQLAlchemy: MySQL/MariaDB through PyMySQL, SQLite): the task repository, its
schema and migrations."""
