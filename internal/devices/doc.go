// Package devices owns the shape of the host devices a conversation gives
// its engine's tools (`conv add --device`, the `devices` of a
// conversation file): a clean path below /dev, not where an engine's own
// ptys, shared memory or queues are mounted, at most Max of them.
//
// The check runs where each layer meets the list: conv add refuses it
// before anything is saved, a conversation file edited by hand is refused
// when it is loaded, and the launch refuses it again before a mount is
// made (scopes), since a file may change between the two. One function
// for all three, in a package of its own: the config layer must not
// import scopes (D-Bus, cgroups, the held child) to read a file, and a
// copy of the rule in each would drift (the config check had lost the
// bound and the reserved directories).
package devices
