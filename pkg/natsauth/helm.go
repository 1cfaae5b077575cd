package natsauth

import (
	"fmt"
	"strings"
)

// HelmSecret is the Kubernetes Secret holding every user's password under
// the user's name (the Alicia chart's nats.auth.secretName default,
// deploy/helm/alicia/README.md).
const HelmSecret = "alicia-nats"

// HelmValues is the authorization of Conf as values of the official nats
// Helm chart (nats-io/k8s, 1.x and 2.x): the users under
// config.merge.authorization, each password written "<< $VAR >>", which
// the chart writes into nats.conf unquoted, so nats-server reads it from
// the environment variable PasswordVar(user); and container.env setting
// each variable from key <user> of Secret secret. No password is in the
// values. A test keeps deploy/helm/alicia/examples/nats-auth-values.yaml
// holding it.
func HelmValues(secret string) string {
	var b strings.Builder
	b.WriteString("# Generated from pkg/natsauth (go test ./pkg/natsauth -run TestHelmValues -update): edit the table there.\n")
	b.WriteString("# The users and permissions of deploy/nats.conf as values of the official nats\n")
	b.WriteString("# chart, given after your own values file (deploy/helm/alicia/README.md, NATS):\n")
	b.WriteString("#   helm install nats nats/nats -n alicia -f nats-values.yaml -f nats-auth-values.yaml\n")
	fmt.Fprintf(&b, "# nats-server reads each password from an environment variable, set from\n# key <user> of the Secret %s: no password is written here.\n", secret)
	b.WriteString("config:\n  merge:\n    authorization:\n      users:\n")
	for _, u := range Users() {
		fmt.Fprintf(&b, "        - user: %q\n", u.Name)
		fmt.Fprintf(&b, "          password: %q\n", "<< $"+PasswordVar(u.Name)+" >>")
		b.WriteString("          permissions:\n")
		yamlAllowDeny(&b, "publish", u.Publish, u.PublishDeny)
		yamlAllowDeny(&b, "subscribe", u.Subscribe, u.SubscribeDeny)
		if u.Responses {
			b.WriteString("            allow_responses: {max: 1, expires: \"2m\"}\n")
		}
	}
	b.WriteString("container:\n  env:\n")
	for _, u := range Users() {
		fmt.Fprintf(&b, "    %s:\n      valueFrom:\n        secretKeyRef: {name: %q, key: %q}\n", PasswordVar(u.Name), secret, u.Name)
	}
	return b.String()
}

// yamlAllowDeny writes one direction's permissions as Conf does: the allow
// list (empty when there is none), then the deny list, if any.
func yamlAllowDeny(b *strings.Builder, direction string, allow, deny []string) {
	fmt.Fprintf(b, "            %s:\n", direction)
	yamlList(b, "allow", allow)
	if len(deny) > 0 {
		yamlList(b, "deny", deny)
	}
}

// yamlList quotes every subject (a double-quoted YAML scalar: a subject
// may start with $ or hold * and >).
func yamlList(b *strings.Builder, key string, subjects []string) {
	if len(subjects) == 0 {
		fmt.Fprintf(b, "              %s: []\n", key)
		return
	}
	fmt.Fprintf(b, "              %s:\n", key)
	for _, s := range subjects {
		fmt.Fprintf(b, "                - %q\n", s)
	}
}
