from django.db import models


class HealthProbe(models.Model):
    """The row /healthz writes to prove the database takes writes. The same transaction
    deletes it, so the table stays empty; a fixed primary key (no sequence) means a probe
    uses up nothing either."""

    id = models.PositiveSmallIntegerField(primary_key=True)
    checked_at = models.DateTimeField()

    class Meta:
        verbose_name = "health probe"

    def __str__(self) -> str:
        return f"health probe at {self.checked_at:%Y-%m-%d %H:%M:%S}"
