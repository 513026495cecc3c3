"""Running the gates: `verify` cuts the lock into jobs, keys each by what it reads (jobkeys), serves
unchanged ones from the caches (cache, runcache), and the commands built on the same runs (matrix,
explore)."""
