package natsauth

import (
	"fmt"
	"strings"
)

// PasswordVar is the environment variable deploy/nats.conf reads user's
// password from (the nats container sets it from the secret file
// SecretName(user)).
func PasswordVar(user string) string {
	return "NATS_PASSWORD_" + strings.ToUpper(strings.ReplaceAll(user, "-", "_"))
}

// SecretName is the compose secret (deploy/secrets/<name>) holding user's
// password, written by `alicia deploy init-secrets`.
func SecretName(user string) string {
	return "nats_password_" + strings.ReplaceAll(user, "-", "_")
}

// Conf is the authorization block of deploy/nats.conf, made from Users:
// every user with its permissions, its password from the environment
// variable PasswordVar(name). A test keeps deploy/nats.conf holding it.
func Conf() string {
	var b strings.Builder
	b.WriteString("# Generated from pkg/natsauth (go test ./pkg/natsauth -run TestDeployConf -update): edit the table there.\n")
	b.WriteString("authorization {\n  users: [\n")
	for _, u := range Users() {
		fmt.Fprintf(&b, "    {\n      user: %q\n      password: $%s\n      permissions: {\n", u.Name, PasswordVar(u.Name))
		fmt.Fprintf(&b, "        publish: {allow: %s%s}\n", list(u.Publish), deny(u.PublishDeny))
		fmt.Fprintf(&b, "        subscribe: {allow: %s%s}\n", list(u.Subscribe), deny(u.SubscribeDeny))
		if u.Responses {
			b.WriteString("        allow_responses: {max: 1, expires: \"2m\"}\n")
		}
		b.WriteString("      }\n    }\n")
	}
	b.WriteString("  ]\n}\n")
	return b.String()
}

// deny is the deny list after an allow list, if any.
func deny(subjects []string) string {
	if len(subjects) == 0 {
		return ""
	}
	return ", deny: " + list(subjects)
}

// list quotes every subject: an unquoted $JS… would be read as a variable.
func list(subjects []string) string {
	if len(subjects) == 0 {
		return "[]"
	}
	var b strings.Builder
	b.WriteString("[\n")
	for _, s := range subjects {
		fmt.Fprintf(&b, "          %q\n", s)
	}
	b.WriteString("        ]")
	return b.String()
}
