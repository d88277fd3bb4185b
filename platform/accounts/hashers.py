"""How staff passwords are stored: Argon2id (argon2-cffi), with OWASP's recommended
minimum cost: 19 MiB of memory, 2 passes, 1 lane.

Django's own Argon2 defaults (100 MiB, 8 lanes) cost about 200 ms a check on a 2-CPU
machine and 100 MiB for every login at once; PBKDF2 at Django's iteration count costs
about 450 ms there, more while a worker grades on the same CPUs. These parameters are
the cheapest OWASP still recommends (about 30 ms). A hash stored with other parameters,
or with PBKDF2, is checked as it was made and re-stored with these at the next login.
"""

from django.contrib.auth.hashers import Argon2PasswordHasher as DjangoArgon2PasswordHasher


class Argon2PasswordHasher(DjangoArgon2PasswordHasher):
    time_cost = 2
    memory_cost = 19 * 1024  # KiB
    parallelism = 1
