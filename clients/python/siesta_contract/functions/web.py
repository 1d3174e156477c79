"""Web functions: Google Custom Search, the Firecrawl functions, web_fetch."""

from __future__ import annotations

from pydantic import Field, field_validator

from siesta_contract.base import Arguments


class SearchArgs(Arguments):
    query: str = Field(min_length=1, description="A specific query")
    count: int = Field(3, description="Results wanted; clamped to 1..10")
    country: str = Field("cz", description="Google gl country code")
    timePeriod: str | None = Field(None, description="dateRestrict, e.g. d1, w1, m1, y1")

    @field_validator("count")
    @classmethod
    def clamp(cls, value: int) -> int:
        """The reference: values are clamped to 1..10."""
        return max(1, min(10, value))


class ScrapeArgs(Arguments):
    url: str = Field(min_length=1, description="Page URL")
    onlyMainContent: bool = True


class CrawlArgs(Arguments):
    url: str = Field(min_length=1, description="Start URL")
    limit: int = Field(10, ge=1, le=100, description="Most pages")
    includePaths: list[str] = Field(default_factory=list, description="Paths to include")
    excludePaths: list[str] = Field(default_factory=list, description="Paths to exclude")


class MapArgs(Arguments):
    url: str = Field(min_length=1, description="Site URL")
    search: str | None = Field(None, description="Filter")
    limit: int = Field(100, ge=1, le=5000, description="Most links")


class WebSearchArgs(Arguments):
    query: str = Field(min_length=1, description="Query")
    limit: int = Field(5, ge=1, le=20, description="Most results")


class WebFetchArgs(Arguments):
    url: str = Field(description="An http(s) URL")
