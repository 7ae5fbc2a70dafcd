"""Which addresses `web_fetch` may connect to, decided where the connection is made.

A page the model asks for must not reach this machine, its network or a cloud's metadata
service. So every address a host name resolves to is checked, once, right before connecting
(`app.kernel.web.fetch.GuardedResolver`, aiohttp's resolver hook), and the connection goes to
exactly the addresses checked: a name that resolves to something else a moment later (DNS
rebinding) changes nothing. An IP literal in a URL is checked by the fetcher itself (aiohttp
resolves nothing for it).

Refused: every address that is not globally routable (loopback, RFC 1918 private, link-local
with 169.254.169.254, CGNAT 100.64/10 with 100.100.100.200, unique-local fc00::/7 with
fd00:ec2::254, documentation, benchmark and reserved ranges, the unspecified address),
multicast, and an IPv6 address that embeds such an IPv4 one (`::ffff:a.b.c.d`, 6to4, NAT64
`64:ff9b::/96`, Teredo). A host name resolving to several addresses is refused if any one is.

`AllowList` is the operator's exception (`FOYA_WEB_FETCH_ALLOW_HOSTS`): host names whose every
address may be reached, and IP addresses or networks that may be reached whatever the name.

`resolve` is the one resolve-and-check every outbound connection made on someone else's say-so
uses (the fetcher's resolver, git's remote host, MCP over HTTP): the addresses it answers are
the only ones that connection may then go to.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass
from typing import NamedTuple

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


class Blocked(OSError):
    """The target is (or resolves to) an address `web_fetch` refuses."""


def embedded(address: Address) -> Address:
    """The IPv4 address an IPv6 one carries (mapped, 6to4, NAT64, Teredo), else itself."""
    if isinstance(address, ipaddress.IPv4Address):
        return address
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address


def blocked(address: Address) -> bool:
    """Whether `address` is one a fetch must not reach (see the module docstring)."""
    inner = embedded(address)
    return not inner.is_global or inner.is_multicast or inner.is_reserved


def literal(host: str) -> Address | None:
    """`host` as an IP address, if it is one (an IPv6 zone is ignored)."""
    try:
        return ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return None


@dataclass(frozen=True)
class AllowList:
    """Hosts and networks the operator lets `web_fetch` reach although they are private."""

    hosts: frozenset[str] = frozenset()
    networks: tuple[Network, ...] = ()

    @classmethod
    def parse(cls, text: str) -> AllowList:
        """Entries separated by commas or spaces: an IP address or network (`10.1.2.0/24`) is
        a network, anything else a host name (compared without case and trailing dot)."""
        hosts: set[str] = set()
        networks: list[Network] = []
        for entry in text.replace(",", " ").split():
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                hosts.add(_name(entry))
        return cls(frozenset(hosts), tuple(networks))

    def allows(self, host: str, address: Address) -> bool:
        """Whether `host` may be reached at `address`."""
        if not blocked(address) or _name(host) in self.hosts:
            return True
        return any(address in network for network in self.networks)

    def lists(self, host: str) -> bool:
        """Whether `host` itself is on the list: by name, or as an IP inside a listed network."""
        address = literal(host)
        if address is None:
            return _name(host) in self.hosts
        return any(address in network for network in self.networks)


class Resolved(NamedTuple):
    """One checked address of a host: connect to exactly this."""

    family: socket.AddressFamily
    proto: int
    address: str
    port: int


async def resolve(
    allow: AllowList, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_UNSPEC
) -> list[Resolved]:
    """Every address `host` (a name or an IP literal) resolves to, or `Blocked` when any one
    is refused by `allow`, is not IP, or there is none; an unknown name is an `OSError`."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, family=family)
    found: list[Resolved] = []
    for found_family, _, proto, _, sockaddr in infos:
        address = literal(str(sockaddr[0]))
        if address is None:  # not an IP socket address: nothing we could vouch for
            raise Blocked(f"{host} resolves to an address that is not IP")
        if not allow.allows(host, address):
            raise Blocked(f"{host} resolves to a private or reserved address ({address})")
        found.append(Resolved(found_family, proto, str(sockaddr[0]), int(sockaddr[1])))
    if not found:
        raise Blocked(f"{host} resolves to no address")
    return found


def _name(host: str) -> str:
    return host.lower().rstrip(".")
