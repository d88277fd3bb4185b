import pytest

from content.markdown import render_markdown
from content.services import content_sync


def test_markdown_renders_the_usual_things():
    html = render_markdown("**bold** and `code`\n\n- one\n- two")
    assert "<strong>bold</strong>" in html
    assert "<code>code</code>" in html
    assert "<li>one</li>" in html


@pytest.mark.parametrize(
    "attack",
    [
        "<script>alert('x')</script>",
        '<img src="x" onerror="alert(1)">',
        "[click](javascript:alert(1))",
        '<a href="#" onclick="alert(1)">x</a>',
        "<iframe src='https://example.org'></iframe>",
        '<div style="background:url(javascript:alert(1))">x</div>',
    ],
)
def test_active_content_comes_out_inert(attack):
    html = render_markdown(attack)
    for needle in ("<script", "onerror", "javascript:", "onclick", "<iframe", "style="):
        assert needle not in html.lower()


@pytest.mark.django_db
def test_script_in_a_content_file_is_inert_on_the_page(content_dir, staff_client):
    prompt = content_dir / "async-parameter-server" / "prompt.md"
    prompt.write_text(prompt.read_text() + "\n<script>window.pwned = 1</script>\n")
    content_sync(root=content_dir)
    page = staff_client.get("/exercises/async-parameter-server/").content.decode()
    assert "The asynchronous" in page or "parameter server" in page.lower()
    assert "window.pwned" not in page
