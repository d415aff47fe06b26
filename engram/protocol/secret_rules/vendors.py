"""Vendor tokens: credentials whose own prefix names them (the library does not know them)."""

from __future__ import annotations

from engram.protocol.secret_rules.core import Rule, shaped

# -- vendor tokens -------------------------------------------------------------------------

#: (rule, pattern, triggers) of credentials whose prefix names them, beyond the ones the
#: library knows. Each has a (fake) example in the corpus. ``\b`` is not used at the left
#: of a token that may follow ``_`` or ``-``: the explicit look-behinds say what may precede.
_L = r"(?<![A-Za-z0-9_])"
_LD = r"(?<![A-Za-z0-9_.-])"
_R = r"(?![A-Za-z0-9_])"
VENDOR_TOKENS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "aws_access_key",
        r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[0-9A-Z]{16}(?![A-Za-z0-9])",
        ("AKIA", "ASIA", "ABIA", "ACCA", "A3T"),
    ),
    (
        "github_token",
        _L + r"(?:gh[pousr]_[A-Za-z0-9_]{30,}|github_pat_[A-Za-z0-9_]{22,})",
        ("gh", "github_pat_"),
    ),
    (
        "gitlab_token",
        r"(?<![A-Za-z0-9_-])(?:(?:glpat|gldt|glft|glsoat|glrt|glptt|gloas|glimt|glagent|glcbt|glffct)-"
        r"[A-Za-z0-9_.-]{20,}|GR1348941[A-Za-z0-9_-]{20,})",
        ("gl", "GR1348941"),
    ),
    (
        "stripe_key",
        _L + r"(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,}|whsec_[0-9A-Za-z]{24,}",
        ("_live_", "_test_", "whsec_"),
    ),
    (
        "openai_key",
        r"(?<![A-Za-z0-9_-])sk-(?:proj-|ant-(?:api\d\d-|admin\d\d-)?|svcacct-|admin-|or-v1-)?[A-Za-z0-9_-]{20,}",
        ("sk-",),
    ),
    (
        "slack_token",
        r"(?<![A-Za-z0-9])(?:xox[abposre]-[A-Za-z0-9-]{10,}|xoxe\.xox[bp]-\d-[A-Za-z0-9]{40,}"
        r"|xapp-\d-[A-Z0-9]{6,}-\d{6,}-[a-f0-9]{32,})"
        r"|https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/]{20,}",
        ("xox", "xapp-", "hooks.slack.com"),
    ),
    (
        "google_api_key",
        r"(?<![A-Za-z0-9_-])AIza[0-9A-Za-z_-]{35}|\bya29\.[0-9A-Za-z_-]{20,}",
        ("aiza", "ya29."),
    ),
    ("google_oauth_secret", _L + r"GOCSPX-[A-Za-z0-9_-]{28}", ("gocspx-",)),
    ("sendgrid_key", r"\bSG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}", ("sg.",)),
    ("twilio_key", r"(?<![A-Za-z0-9])(?:AC|SK)[0-9a-f]{32}(?![A-Za-z0-9])", ("AC", "SK")),
    ("npm_token", _L + r"npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])", ("npm_",)),
    ("pypi_token", r"\bpypi-AgE[A-Za-z0-9_-]{50,}", ("pypi-",)),
    ("huggingface_token", _L + r"hf_[A-Za-z0-9]{30,}(?![A-Za-z0-9])", ("hf_",)),
    ("square_token", r"\bsq0(?:csp|atp)-[0-9A-Za-z_-]{22,}", ("sq0",)),
    ("telegram_token", r"(?<![0-9])\d{8,10}:AA[0-9A-Za-z_-]{33}(?![0-9A-Za-z_-])", (":aa",)),
    ("azure_storage_key", r"AccountKey=[A-Za-z0-9+/=]{86,88}", ("accountkey=",)),
    ("jwt", r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}", ("eyj",)),
    # -- the vendor tokens people paste ----------------------------------------------------
    ("vault_token", _LD + r"hv[sbr]\.[A-Za-z0-9_-]{24,}", ("hvs.", "hvb.", "hvr.")),
    ("digitalocean_token", _L + r"do[opr]_v1_[a-f0-9]{64}" + _R, ("_v1_",)),
    ("shopify_token", _L + r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}" + _R, ("shp",)),
    ("databricks_token", _L + r"dapi[a-f0-9]{32}(?:-\d)?" + _R, ("dapi",)),
    (
        "grafana_token",
        _L
        + r"(?:glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}|glc_[A-Za-z0-9+/]{32,400}={0,2}|eyJrIjoi[A-Za-z0-9+/]{40,}={0,2})",
        ("glsa_", "glc_", "eyjrijoi"),
    ),
    ("atlassian_token", _L + r"AT(?:ATT|CTT)3[A-Za-z0-9_=-]{100,}", ("atatt3", "atctt3")),
    ("age_secret_key", r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}", ("age-secret-key-1",)),
    ("postman_key", _L + r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}" + _R, ("pmak-",)),
    ("linear_key", _L + r"lin_(?:api|oauth)_[A-Za-z0-9]{40}" + _R, ("lin_api_", "lin_oauth_")),
    (
        "doppler_token",
        _LD + r"dp\.(?:st|pt|ct|sa|scim|audit)\.(?:[A-Za-z0-9_-]{1,40}\.)?[A-Za-z0-9]{40,44}" + _R,
        ("dp.",),
    ),
    (
        "newrelic_key",
        _L
        + r"(?:NR(?:AK|AA|IQ|SP)-[A-Z0-9]{27}|NRII-[A-Za-z0-9_-]{32}|NRJS-[a-f0-9]{19}|(?:eu01xx)?[a-f0-9]{30,36}NRAL)"
        + _R,
        ("nrak-", "nrii-", "nraa-", "nriq-", "nrsp-", "nrjs-", "nral"),
    ),
    # -- other vendors whose keys name themselves ------------------------------------------
    ("sentry_token", _L + r"sntr[ysu]s?_[A-Za-z0-9+/=_-]{60,}", ("sntry", "sntru")),
    ("mailgun_key", _L + r"key-[0-9a-f]{32}" + _R, ("key-",)),
    ("supabase_token", _L + r"sb(?:p|_secret)_[A-Za-z0-9_-]{32,}", ("sbp_", "sb_secret_")),
    ("netlify_token", _L + r"nfp_[A-Za-z0-9]{36}" + _R, ("nfp_",)),
    ("render_key", _L + r"rnd_[A-Za-z0-9]{32}" + _R, ("rnd_",)),
    ("pulumi_token", _L + r"pul-[a-f0-9]{40}" + _R, ("pul-",)),
    ("terraform_token", _L + r"[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,}", (".atlasv1.",)),
    ("dropbox_token", _LD + r"sl\.[A-Za-z0-9_-]{130,}", ("sl.",)),
    (
        "notion_token",
        _L + r"(?:ntn_[0-9]{11}[A-Za-z0-9]{35}|secret_[A-Za-z0-9]{43})" + _R,
        ("ntn_", "secret_"),
    ),
    ("airtable_token", _L + r"pat[A-Za-z0-9]{14}\.[a-f0-9]{64}" + _R, ("pat",)),
    ("figma_token", _L + r"figd_[A-Za-z0-9_-]{40,}", ("figd_",)),
    ("replicate_token", _L + r"r8_[A-Za-z0-9]{37}" + _R, ("r8_",)),
    ("groq_key", _L + r"gsk_[A-Za-z0-9]{52}" + _R, ("gsk_",)),
    ("perplexity_key", _L + r"pplx-[A-Za-z0-9]{48}" + _R, ("pplx-",)),
    ("xai_key", _L + r"xai-[A-Za-z0-9]{80}" + _R, ("xai-",)),
    ("planetscale_token", _L + r"pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_.=-]{32,64}", ("pscale_",)),
    (
        "tailscale_key",
        _L + r"tskey-(?:auth|api|client|scim|webhook)-[A-Za-z0-9]{6,}-[A-Za-z0-9]{20,}",
        ("tskey-",),
    ),
    ("onepassword_token", _L + r"ops_eyJ[A-Za-z0-9+/=_-]{100,}", ("ops_eyj",)),
    ("buildkite_token", _L + r"bkua_[a-f0-9]{40}" + _R, ("bkua_",)),
    ("circleci_token", _L + r"CCIPAT_[A-Za-z0-9]{22}_[a-f0-9]{40}" + _R, ("ccipat_",)),
    ("docker_token", _L + r"dckr_(?:pat|oat)_[A-Za-z0-9_-]{27,}", ("dckr_",)),
    ("rubygems_key", _L + r"rubygems_[a-f0-9]{48}" + _R, ("rubygems_",)),
    ("nuget_key", _L + r"oy2[a-z0-9]{43}" + _R, ("oy2",)),
    ("clojars_token", _L + r"CLOJARS_[a-z0-9]{60}" + _R, ("clojars_",)),
    ("brevo_key", _L + r"xkeysib-[a-f0-9]{64}-[A-Za-z0-9]{16}" + _R, ("xkeysib-",)),
    ("contentful_token", _L + r"CFPAT-[A-Za-z0-9_-]{43}", ("cfpat-",)),
    ("shippo_token", _L + r"shippo_(?:live|test)_[a-f0-9]{40}" + _R, ("shippo_",)),
    ("easypost_key", _L + r"EZ[AT]K[a-z0-9]{54}" + _R, ("ezak", "eztk")),
    ("typeform_token", _L + r"tfp_[A-Za-z0-9_-]{40,}", ("tfp_",)),
    ("alibaba_key", _L + r"LTAI[A-Za-z0-9]{12,20}" + _R, ("ltai",)),
    ("sonarqube_token", _L + r"sq[upa]_[a-f0-9]{40}" + _R, ("squ_", "sqp_", "sqa_")),
    ("heroku_key", _L + r"HRKU-[A-Za-z0-9_-]{40,}", ("hrku-",)),
    ("prefect_key", _L + r"pnu_[A-Za-z0-9]{36}" + _R, ("pnu_",)),
    ("langsmith_key", _L + r"lsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10}" + _R, ("lsv2_",)),
    ("pinecone_key", _L + r"pcsk_[A-Za-z0-9_]{40,}", ("pcsk_",)),
    ("mapbox_token", _L + r"sk\.eyJ[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{20,}", ("sk.eyj",)),
    (
        "azure_client_secret",
        r"(?<![A-Za-z0-9_~.-])[A-Za-z0-9_~.-]{3}\dQ~[A-Za-z0-9_~.-]{31,34}(?![A-Za-z0-9_~.-])",
        ("q~",),
    ),
    (
        "fly_token",
        r"(?:\bFlyV1 |" + _L + r")f[mo][12a-z]?_[A-Za-z0-9+/=,_-]{40,}",
        ("fm1", "fm2", "fo1_", "flyv1"),
    ),
    (
        "webhook_url",
        r"https://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/\d{5,}/[A-Za-z0-9_-]{40,}"
        r"|https://[A-Za-z0-9-]+\.webhook\.office\.com/webhookb2/[^\s\"'<>]{40,}",
        ("/api/webhooks/", "webhook.office.com"),
    ),
    ("cloudflare_origin_key", _L + r"v1\.0-[a-f0-9]{24}-[a-f0-9]{146}" + _R, ("v1.0-",)),
    ("frameio_token", _L + r"fio-u-[A-Za-z0-9_=-]{64}", ("fio-u-",)),
)
#: Vendor prefixes matched in the text's own case (the rest are case-insensitive triggers).
_EXACT = frozenset(("aws_access_key", "twilio_key", "gitlab_token"))


def vendor_rules() -> tuple[Rule, ...]:
    return tuple(shaped(name, p, *triggers, exact_case=name in _EXACT) for name, p, triggers in VENDOR_TOKENS)
