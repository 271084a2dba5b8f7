from django.apps import AppConfig


class ReviewConfig(AppConfig):
    """Server review: surface history and diff, approval and drift, description review, load tests."""

    name = "review"
    verbose_name = "Server review"

    def ready(self) -> None:
        # tools sends `server_listed` after every refresh; review records the surface. tools never imports review.
        from review import receivers  # noqa: F401
