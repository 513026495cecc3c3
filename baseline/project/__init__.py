"""The lock and the project: the intent a person writes, the lock `lock` writes, the rules between
them (lockcheck), project-relative paths, provenance, and the commands that edit the lock by
hand (accept, diff, init's scaffold)."""
