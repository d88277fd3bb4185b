import re

from django import template
from django.utils.html import escape
from django.utils.safestring import mark_safe

from content.markdown import render_markdown

register = template.Library()


@register.filter(name="markdown")
def markdown_filter(text: str) -> str:
    # Safe because render_markdown sanitizes with nh3 after rendering.
    return mark_safe(render_markdown(text))


INLINE_CODE = re.compile(r"`([^`\n]+)`")


@register.filter(name="inline_code")
def inline_code_filter(text: str) -> str:
    """Plain text whose `backticked` parts are shown as code (a verdict's message)."""
    return mark_safe(INLINE_CODE.sub(r"<code>\1</code>", escape(text)))
