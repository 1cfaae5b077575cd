package bus

// StreamNames are the names of the streams EnsureStreams creates.
func StreamNames() []string {
	var names []string
	for _, c := range StreamConfigs(StreamsConfig{}) {
		names = append(names, c.Name)
	}
	return names
}
